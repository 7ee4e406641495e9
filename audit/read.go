package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// Run is one run directory under an audit root.
type Run struct {
	ID  string // run id, validated
	Dir string // ROOT/ID
}

// EventsPath returns the path of the run's events.jsonl.
func (r Run) EventsPath() string { return filepath.Join(r.Dir, EventsFile) }

// Workspace is the workspace the run's run.start records, or "" when it cannot be read
// (or the log predates the field).
func (r Run) Workspace() string {
	f, err := os.Open(r.EventsPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	var s Summary
	_ = eachLine(f, func(n int, line []byte) error {
		_ = s.first(line)
		return errStop
	})
	return s.Workspace
}

// errStop ends an eachLine walk early.
var errStop = errors.New("stop")

// Open finds the run runID under root. The id is validated first, so it cannot name a
// path outside the root.
func Open(root, runID string) (Run, error) {
	if err := ValidateRunID(runID); err != nil {
		return Run{}, err
	}
	r := Run{ID: runID, Dir: filepath.Join(root, runID)}
	if _, err := os.Stat(r.EventsPath()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Run{}, fmt.Errorf("%w: %s in %s", ErrRunNotFound, runID, root)
		}
		return Run{}, fmt.Errorf("opening run: %w", err)
	}
	return r, nil
}

// ReadEvents reads the records of the log at path, in file order. It stops at the first
// line that is not a record and returns the records before it together with an error
// naming the line; a partial last line gives an error matching ErrTruncated. It does not
// check the hash chain: that is Verify's job.
func ReadEvents(path string) ([]Record, error) {
	var recs []Record
	err := EachEvent(path, func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

// EachEvent calls fn with each record of the log at path, in file order, holding one
// line at a time: what a server reads of a log a sandbox can grow by a megabyte a
// command. It stops at fn's first error, returned as it is, and otherwise fails as
// ReadEvents does.
func EachEvent(path string, fn func(Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading events: %w", err)
	}
	defer f.Close()
	return eachLine(f, func(n int, line []byte) error {
		r, err := parseRecord(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		return fn(r)
	})
}

// eachLine calls fn with each newline-terminated line of r (without the newline) and its
// 1-based number. A last line without newline is an error matching ErrTruncated.
func eachLine(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 {
				return fmt.Errorf("line %d: %w: partial line of %d bytes", n, ErrTruncated, len(line))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading events: %w", err)
		}
		if err := fn(n, line[:len(line)-1]); err != nil {
			return err
		}
	}
}

// parseRecord decodes one line strictly: unknown fields, trailing data and unknown
// versions are errors.
func parseRecord(line []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.More() {
		return Record{}, fmt.Errorf("%w: data after the record", ErrMalformed)
	}
	if r.V != Version {
		return Record{}, fmt.Errorf("%w: v=%d", ErrUnsupportedVersion, r.V)
	}
	return r, nil
}

// Summary describes one run for a listing.
type Summary struct {
	ID           string
	Start        time.Time // ts of run.start (zero if unreadable)
	ContractPath string
	Backend      string
	Workspace    string    // absolute workspace path from run.start ("" in logs that predate it)
	Ended        time.Time // ts of run.end, when Sealed
	Commands     int       // cmd.start lines
	Sealed       bool      // the last line is run.end
	End          RunEnd    // the run.end body, when Sealed
	Err          error     // why the log could not be read, if it could not
}

// Status is the final status of the run for people: "exit 0 (exited)", or "unsealed"
// when the log has no run.end (cordon crashed, or the log was truncated).
func (s Summary) Status() string {
	switch {
	case s.Err != nil:
		return "unreadable"
	case !s.Sealed:
		return "unsealed"
	}
	return fmt.Sprintf("exit %d (%s)", s.End.ExitCode, s.End.Reason)
}

// List summarises every run under root, newest first. Entries whose name is not a run id
// are ignored; a run whose log cannot be read is listed with Err set. A missing root has
// no runs.
func List(root string) ([]Summary, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	var out []Summary
	for _, e := range ents {
		if !e.IsDir() || ValidateRunID(e.Name()) != nil {
			continue
		}
		out = append(out, summarize(Run{ID: e.Name(), Dir: filepath.Join(root, e.Name())}))
	}
	slices.SortFunc(out, func(a, b Summary) int {
		if c := strings.Compare(b.ID[:16], a.ID[:16]); c != 0 {
			return c // ids sort by creation time to the second
		}
		if c := b.Start.Compare(a.Start); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// summarize reads a run's log: the first line fully, the type of every other line, and
// the last line fully when it is run.end.
func summarize(r Run) Summary {
	s := Summary{ID: r.ID}
	f, err := os.Open(r.EventsPath())
	if err != nil {
		s.Err = err
		return s
	}
	defer f.Close()
	var last []byte
	err = eachLine(f, func(n int, line []byte) error {
		if n == 1 {
			return s.first(line)
		}
		typ := lineType(line)
		if typ == event.CmdStart {
			s.Commands++
		}
		if !AfterSeal(typ) {
			last = nil
		}
		if typ == event.RunEnd {
			last = slices.Clone(line)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrTruncated) {
		s.Err = err
	}
	if last != nil {
		if rec, err := parseRecord(last); err == nil && rec.DecodeBody(&s.End) == nil {
			s.Sealed, s.Ended = true, rec.TS
		}
	}
	return s
}

func (s *Summary) first(line []byte) error {
	rec, err := parseRecord(line)
	if err != nil {
		return err
	}
	var start RunStart
	if rec.Type != event.RunStart || rec.DecodeBody(&start) != nil {
		return fmt.Errorf("%w: first line is not run.start", ErrMalformed)
	}
	s.Start, s.ContractPath, s.Backend, s.Workspace = rec.TS, start.ContractPath, start.Backend, start.Workspace
	return nil
}

// lineType returns the type of a canonical line without decoding its body: the fields
// before "body" hold no caller-controlled text but cmd, which is decoded properly.
func lineType(line []byte) event.Type {
	i := bytes.Index(line, []byte(`,"body":`))
	if i < 0 {
		return ""
	}
	var head struct {
		Type event.Type `json:"type"`
	}
	if json.Unmarshal(append(slices.Clip(line[:i]), '}'), &head) != nil {
		return ""
	}
	return head.Type
}
