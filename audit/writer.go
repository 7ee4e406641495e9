package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/trace"
)

// Writer implements event.Sink.
var _ event.Sink = (*Writer)(nil)

// SyncPolicy says when the writer calls fsync(2). Every event is written with one
// write(2) of the whole line as soon as it is emitted, so it survives a crash of cordon
// itself; fsync only matters for a crash of the machine.
type SyncPolicy int

// Sync policies. The zero value is the default.
const (
	// SyncCommands fsyncs after run.start, after every cmd.end and fs.diff, and at the
	// seal: a machine crash loses at most the network and alert events of the running
	// command. Measured on the 2-core CI VM (ext4, BenchmarkWriter): about 6 µs per
	// event without fsync and 220 µs with it, so an fsync per event would cap a busy
	// proxy at ~4,500 events/s and serialise every emitter behind the disk, for no
	// gain against a crash of cordon itself.
	SyncCommands SyncPolicy = iota
	// SyncEvery fsyncs after every event.
	SyncEvery
	// SyncClose fsyncs only when the log is sealed.
	SyncClose
	// SyncOneCommand is SyncCommands for a run of one command, which reports nothing
	// before its seal: its fs.diff is made durable by the seal's fsync rather than by
	// one of its own (cmd.end's still runs beside the diff, and the seal waits for
	// it). A machine crash in the milliseconds between the diff and the seal (the
	// run's teardown) can lose the fs.diff with the seal; the log is then unsealed,
	// as after a crash while the command ran. Saves an fsync on the way out of
	// every `cordon run`.
	SyncOneCommand
)

// Defaults of [Options] fields.
const (
	DefaultMaxInlinePatch = 64 << 10
	DefaultMaxItemized    = 1000
	DefaultMaxPatchStored = 256 << 20
)

// Options configures a [Writer]. Zero fields mean defaults.
type Options struct {
	// Start is the body of the run.start line that Create writes.
	Start RunStart
	// Redactor holds the secret values to redact; nil means a new, empty one (see
	// [Writer.Redactor]). It may be shared with the credential broker.
	Redactor *Redactor
	// Sync says when to fsync; the zero value is SyncCommands.
	Sync SyncPolicy
	// MaxInlinePatch is the most bytes of patch an fs.diff line carries (default
	// 64 KiB); a longer patch is also stored whole in a file next to the log.
	MaxInlinePatch int
	// MaxItemized is the most changes (default 1,000) and problems (a tenth) an
	// fs.diff line itemizes, and their paths together at most 64 bytes per change;
	// the rest is counted in the line's gap, so one line stays bounded whatever the
	// workspace holds.
	MaxItemized int
	// MaxPatchStored bounds the bytes of patch files the run stores next to its log
	// (default 256 MiB); past it a patch is kept only inline, cut, and the line's gap
	// says how much was not stored.
	MaxPatchStored int64
	// StartSyncLater makes Create return once run.start is written, without waiting
	// for the disk: the run directory's entry and the line are made durable in the
	// background, and [Writer.WaitStart] waits for that. A caller sets it to overlap
	// the disk with the rest of its start, and calls WaitStart before anything the log
	// must keep (a command) can happen. A failure there fails the writer.
	StartSyncLater bool

	now func() time.Time // nil means time.Now; tests set it
}

// logFile is the part of *os.File the writer uses; tests substitute failing files.
type logFile interface {
	io.Writer
	Sync() error
	Close() error
	Truncate(size int64) error
}

// Writer appends the events of one run to its hash-chained log.
//
// A Writer is safe for concurrent use by multiple goroutines. Bodies are encoded and
// redacted by the emitting goroutine; one mutex then serialises the assignment of seq,
// the chaining and the write(2), so lines appear in seq order. Once a write fails the
// writer fails closed: it records the error, closes the channel returned by Failed and
// drops every later event.
type Writer struct {
	run    string
	dir    string
	opts   Options
	red    *Redactor
	failed chan struct{}
	patchN atomic.Int64 // patch files written
	stored atomic.Int64 // bytes of patch files written

	// mu guards the fields below and serialises writes to f.
	mu       sync.Mutex
	f        logFile
	seq      int64  // seq of the last line written
	prev     string // hash of the last line written
	size     int64  // bytes written, for rolling back a partial line
	commands int
	dropped  int64
	err      error // the first failure; set once
	closed   bool
	closeErr error

	// pending, guarded by mu, receives the result of cmd.end's fsync, which runs
	// while the workspace diff is computed; the next fsync, Synced and Close wait
	// for it.
	pending chan error

	startSynced chan struct{} // closed once run.start is durable (or failed to be)
	startErr    error         // why it is not; read after startSynced is closed
}

// Create creates the run directory root/runID (mode 0700, creating root if needed, and
// refusing a root that [paths.CheckDir] would: another user could change it) and
// its events.jsonl (mode 0600, append-only), and writes the run.start line. It fails
// with an error matching ErrRootUnwritable when the root cannot be written, and
// ErrRunExists when the run directory already exists.
func Create(root, runID string, opts Options) (*Writer, error) {
	if err := ValidateRunID(runID); err != nil {
		return nil, err
	}
	if opts.MaxInlinePatch <= 0 {
		opts.MaxInlinePatch = DefaultMaxInlinePatch
	}
	if opts.MaxItemized <= 0 {
		opts.MaxItemized = DefaultMaxItemized
	}
	if opts.MaxPatchStored <= 0 {
		opts.MaxPatchStored = DefaultMaxPatchStored
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.Redactor == nil {
		opts.Redactor = NewRedactor()
	}
	// Made, or checked, all the way up (paths.MakeDir): a log under a directory
	// another user controls could be renamed away and replaced by that user.
	if err := paths.MakeDir(root, paths.Owner()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRootUnwritable, err)
	}
	dir := filepath.Join(root, runID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %s", ErrRunExists, dir)
		}
		return nil, fmt.Errorf("%w: %w", ErrRootUnwritable, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRootUnwritable, err)
	}
	if !opts.StartSyncLater {
		syncDir(dir)
	}
	w := &Writer{run: runID, dir: dir, opts: opts, red: opts.Redactor, f: f, failed: make(chan struct{}), startSynced: make(chan struct{})}
	if _, err := w.record(event.Event{Type: event.RunStart, Body: opts.Start}); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %w", ErrRootUnwritable, err)
	}
	if !opts.StartSyncLater {
		close(w.startSynced)
		return w, nil
	}
	go func() {
		defer close(w.startSynced)
		syncDir(dir)
		if opts.Sync != SyncClose {
			if err := syncTraced(f, event.RunStart); err != nil {
				w.startErr = fmt.Errorf("syncing %s: %w", w.Path(), err)
				w.fail(w.startErr)
			}
		}
	}()
	return w, nil
}

// closedChan is a channel closed already.
func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// WaitStart waits until run.start is durable (see [Options.StartSyncLater]; at once
// otherwise) and returns why it could not be made so.
func (w *Writer) WaitStart() error {
	<-w.startSynced
	return w.startErr
}

// syncTraced is f.Sync, timed as audit.fsync.TYPE when tracing is on: typ is the
// event the fsync makes durable.
func syncTraced(f interface{ Sync() error }, typ event.Type) error {
	if !trace.Enabled() {
		return f.Sync()
	}
	defer trace.Begin("audit.fsync." + string(typ)).End()
	return f.Sync()
}

// syncDir makes a new directory entry durable; failure only weakens durability.
func syncDir(dir string) {
	defer trace.Begin("audit.fsync.dir").End()
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// RunID returns the id of the run.
func (w *Writer) RunID() string { return w.run }

// Dir returns the run directory.
func (w *Writer) Dir() string { return w.dir }

// Path returns the path of events.jsonl.
func (w *Writer) Path() string { return filepath.Join(w.dir, EventsFile) }

// Redactor returns the writer's redactor, to add secrets as they are issued.
func (w *Writer) Redactor() *Redactor { return w.red }

// Failed returns a channel closed when the writer fails; the runner stops the run then.
func (w *Writer) Failed() <-chan struct{} { return w.failed }

// Err returns the failure that stopped the writer, or nil.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Head returns the hash of the last line written. Recorded outside the run directory
// (printed, or kept by CI) it lets Verify detect a log rewritten wholesale.
func (w *Writer) Head() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.prev
}

// Emit implements event.Sink. Errors are not returned but recorded: see Err and Failed.
func (w *Writer) Emit(e event.Event) { _, _ = w.Record(e) }

// Record writes one event and returns its seq. run.start and run.end are reserved to
// Create and Close. An event that cannot be encoded fails the writer, like a failed write:
// the log must not silently miss an event.
func (w *Writer) Record(e event.Event) (int64, error) {
	if e.Type == event.RunStart || e.Type == event.RunEnd {
		err := fmt.Errorf("%w: %s is written by Create/Close", ErrBadEvent, e.Type)
		w.fail(err)
		return 0, err
	}
	return w.record(e)
}

// StartCmd writes a cmd.start line and returns the command id to put in the Cmd field of
// the command's other events.
func (w *Writer) StartCmd(b CmdStart) (string, error) {
	seq, err := w.Record(event.Event{Type: event.CmdStart, Body: b})
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(seq, 10), nil
}

func (w *Writer) record(e event.Event) (int64, error) {
	body, err := w.encodeBody(e)
	if err != nil {
		err = fmt.Errorf("%w: %s: %w", ErrBadEvent, e.Type, err)
		w.fail(err)
		return 0, err
	}
	cmd, typ := w.red.Redact(e.Cmd), event.Type(w.red.Redact(string(e.Type)))
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return 0, fmt.Errorf("%w: %w", ErrWriterFailed, w.err)
	case w.closed:
		w.dropped++
		return 0, ErrClosed
	}
	return w.appendLocked(typ, cmd, e.Time, body)
}

// encodeBody returns the redacted JSON encoding of e's body, which must be an object.
func (w *Writer) encodeBody(e event.Event) ([]byte, error) {
	if e.Type == "" {
		return nil, errors.New("no event type")
	}
	body := w.sanitize(e.Body)
	if body == nil {
		return []byte("{}"), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // patches are full of < > &; keep them readable
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if string(out) == "null" { // a typed nil pointer
		return []byte("{}"), nil
	}
	if len(out) == 0 || out[0] != '{' {
		return nil, errors.New("body is not a JSON object")
	}
	return w.red.redactJSON(out)
}

// sanitize enforces the rules of this package's own bodies that a careless caller could
// break: env values never logged, output heads never ending in part of a secret.
func (w *Writer) sanitize(body any) any {
	switch b := body.(type) {
	case *CmdStart:
		if b == nil {
			return nil
		}
		return w.sanitize(*b)
	case CmdStart:
		env := make([]string, len(b.Env))
		for i, kv := range b.Env {
			env[i], _, _ = strings.Cut(kv, "=")
		}
		b.Env = env
		return b
	case *CmdEnd:
		if b == nil {
			return nil
		}
		return w.sanitize(*b)
	case CmdEnd:
		for _, o := range []*Output{&b.Stdout, &b.Stderr} {
			if o.Truncated {
				o.Head = w.red.trimPartial(o.Head)
			}
		}
		return b
	}
	return body
}

// tsLayout is RFC 3339 with exactly nine fraction digits, so that lines sort as text.
const tsLayout = "2006-01-02T15:04:05.000000000Z07:00"

// appendLocked writes one line. w.mu must be held.
func (w *Writer) appendLocked(typ event.Type, cmd string, ts time.Time, body []byte) (int64, error) {
	seq := w.seq + 1
	if ts.IsZero() {
		ts = w.opts.now()
	}
	if typ == event.CmdStart {
		cmd = strconv.FormatInt(seq, 10)
	}
	line := encodeLine(Record{V: Version, Seq: seq, TS: ts, Run: w.run, Type: typ, Cmd: cmd, Body: body, Prev: w.prev})
	n, err := w.f.Write(line)
	switch {
	case err != nil || !w.syncs(typ) || typ == event.RunStart && w.opts.StartSyncLater:
	case typ == event.CmdEnd && w.opts.Sync != SyncEvery:
		// Made durable while the caller computes the command's fs.diff: the next
		// fsync (fs.diff's, or the seal's under SyncOneCommand), or Synced, waits
		// for this one.
		err = w.waitPendingLocked()
		if err == nil {
			ch, f := make(chan error, 1), w.f
			go func() { ch <- syncTraced(f, typ) }()
			w.pending = ch
		}
		n = len(line)
	default:
		err = errors.Join(syncTraced(w.f, typ), w.waitPendingLocked())
		n = len(line) // the line is written; only its durability is in doubt
	}
	if err != nil {
		w.failLocked(fmt.Errorf("writing %s: %w", w.Path(), err), n)
		return 0, fmt.Errorf("%w: %w", ErrWriterFailed, w.err)
	}
	w.seq, w.size = seq, w.size+int64(n)
	w.prev = string(line[len(line)-3-hashHexLen : len(line)-3]) // before `"}\n`
	if typ == event.CmdStart {
		w.commands++
	}
	return seq, nil
}

// waitPendingLocked waits for the fsync of cmd.end still running, if one is, and
// returns its error. w.mu must be held.
func (w *Writer) waitPendingLocked() error {
	if w.pending == nil {
		return nil
	}
	err := <-w.pending
	w.pending = nil
	return err
}

// Synced waits until every line the sync policy makes durable is: the fsync of the
// last cmd.end, which runs in the background, has ended. A failure fails the writer.
func (w *Writer) Synced() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.waitPendingLocked(); err != nil {
		w.failLocked(fmt.Errorf("syncing %s: %w", w.Path(), err), 0)
		return fmt.Errorf("%w: %w", ErrWriterFailed, w.err)
	}
	return nil
}

// syncs says whether a line of type t is made durable (fsynced) once written, as the
// sync policy says.
func (w *Writer) syncs(t event.Type) bool {
	switch w.opts.Sync {
	case SyncEvery:
		return true
	case SyncCommands:
		return t == event.RunStart || t == event.CmdEnd || t == event.FSDiff || t == event.RunEnd
	case SyncOneCommand:
		return t == event.RunStart || t == event.CmdEnd || t == event.RunEnd
	}
	return false
}

// fail records err as the writer's failure.
func (w *Writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(err, 0)
}

// failLocked records err (the first one wins), rolls back a partial line of written
// bytes so that the log still ends on a whole line, and signals Failed. w.mu must be
// held.
func (w *Writer) failLocked(err error, written int) {
	if w.err != nil {
		return
	}
	w.err = err
	if written > 0 {
		_ = w.f.Truncate(w.size)
	}
	close(w.failed)
}

// Close seals the log with a run.end line carrying end (with Commands and Dropped filled
// in), fsyncs and closes it. If the writer had failed, nothing more is written (the log
// stays unsealed) and the failure is returned. Close is idempotent: later calls return
// the first call's result. Events emitted after Close are dropped.
func (w *Writer) Close(end RunEnd) error {
	<-w.startSynced // no fsync of run.start still running on f when it is closed
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closeErr
	}
	w.closed = true
	var errs []error
	if err := w.waitPendingLocked(); err != nil && w.err == nil {
		w.failLocked(fmt.Errorf("syncing %s: %w", w.Path(), err), 0)
	}
	if w.err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrWriterFailed, w.err))
	} else {
		end.Commands, end.Dropped = w.commands, w.dropped
		body, err := w.encodeBody(event.Event{Type: event.RunEnd, Body: end})
		if err == nil {
			_, err = w.appendLocked(event.RunEnd, "", time.Time{}, body)
		}
		errs = append(errs, err)
		if w.opts.Sync == SyncClose {
			errs = append(errs, syncTraced(w.f, event.RunEnd))
		}
	}
	if err := w.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing audit log: %w", err))
	}
	w.closeErr = errors.Join(errs...)
	return w.closeErr
}

const hashHexLen = 2 * sha256.Size

// encodeLine returns the line of r (with its trailing newline), computing r.Hash: the
// hex SHA-256 of the canonical encoding, which is the line itself with the hash value
// left empty ("hash":"") and no newline.
func encodeLine(r Record) []byte {
	b := make([]byte, 0, 200+len(r.Body))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = append(b, `,"ts":"`...)
	b = r.TS.UTC().AppendFormat(b, tsLayout)
	b = append(b, `","run":`...)
	b = appendString(b, r.Run)
	b = append(b, `,"type":`...)
	b = appendString(b, string(r.Type))
	if r.Cmd != "" {
		b = append(b, `,"cmd":`...)
		b = appendString(b, r.Cmd)
	}
	b = append(b, `,"body":`...)
	b = append(b, r.Body...)
	b = append(b, `,"prev":`...)
	b = appendString(b, r.Prev)
	b = append(b, `,"hash":"`...)
	sum := sha256.Sum256(append(b, `"}`...))
	b = hex.AppendEncode(b, sum[:])
	return append(b, "\"}\n"...)
}

func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	_ = writeJSONString(&buf, s) // a string always encodes
	return append(b, buf.Bytes()...)
}
