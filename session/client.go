// Package session drives cordon sessions from a Go program, such as an agent harness:
// [Start] a session (a sandbox and its services, kept by a supervisor process), [Open]
// one by id, run commands in it with [Session.Exec] (output streamed to writers, or
// buffered and capped for a model's context window), [Session.Sweep] its spill files
// and [Session.Stop] it. It speaks the supervisor's socket protocol (docs/sessions.md),
// the same one `cordon exec` uses, so a harness in any language can do the same.
package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/session/wire"
)

// ErrNoSession is returned by Open for an id with no session.
var ErrNoSession = errors.New("no such session")

// Error is a failure reported by the supervisor (or by a server, session/remote):
// cordon could not run the command. Code is the exit status `cordon exec` gives it
// (125, or 2 for a bad request).
type Error struct {
	Code int
	Msg  string
	// Quota and RetryAfter are set when a server refused the request over one of the
	// tenant's quotas (429): which one, and when to try again (0 when it did not say).
	Quota      string
	RetryAfter time.Duration
	// NoSpace is set when the supervisor failed on a full disk (ENOSPC, EDQUOT).
	NoSpace bool
}

func (e *Error) Error() string { return e.Msg }

// ExitStatus is Code, the status `cordon exec` exits with (errdefs.ExitCode reads it),
// or 125 when it is unset.
func (e *Error) ExitStatus() int {
	if e.Code == 0 {
		return errdefs.ExitCannotRun
	}
	return e.Code
}

// StartOptions configure Start. Zero fields mean cordon's defaults.
type StartOptions struct {
	Cordon   string // the cordon binary; "" means "cordon" on PATH
	Contract string // contract file; "" means the built-in default
	Backend  string // bwrap, docker, containerd or auto
	AuditDir string
	Dir      string // working directory of `cordon session start` (the workspace)
	Env      []string
	Stage    bool // a staged session (checkpoint, rollback)
}

// Start starts a session with `cordon session start` and opens it.
func Start(ctx context.Context, o StartOptions) (*Session, error) {
	bin := o.Cordon
	if bin == "" {
		bin = "cordon"
	}
	args := []string{"session", "start"}
	if o.Contract != "" {
		args = append(args, "-c", o.Contract)
	}
	if o.Backend != "" {
		args = append(args, "--backend", o.Backend)
	}
	if o.AuditDir != "" {
		args = append(args, "--audit-dir", o.AuditDir)
	}
	if o.Stage {
		args = append(args, "--stage")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = o.Dir, localEnv(o.Env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(stderr.String()), "cordon: "))
		if msg == "" {
			msg = err.Error()
		}
		return nil, &Error{Code: errdefs.ExitCannotRun, Msg: "session start: " + msg}
	}
	return open(paths.RunRootIn(o.Env), strings.TrimSpace(string(out)))
}

// localEnv is env (nil: this process's) without $CORDON_HOST: Start starts a session
// on this host, and a cordon that inherited a host would start it on that server
// instead (a server starting its sessions so would call itself).
func localEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "CORDON_HOST=") })
}

// Session is a handle on a running session; it holds no connection, so it may be
// used from several goroutines.
type Session struct {
	info wire.Info
	root paths.Root
}

// Open finds the session id of this user.
func Open(id string) (*Session, error) { return open(paths.RunRoot(), id) }

// OpenWith finds session id where a cordon started with the environment env published
// it (its CORDON_RUN_ROOT), as [Start] does for the session it starts.
func OpenWith(env []string, id string) (*Session, error) { return open(paths.RunRootIn(env), id) }

// open finds session id in the run root root. The sessions directory must be safe to
// trust all the way up and the record must be this user's ([paths.CheckDir],
// [wire.Read]): a directory another user made first (a run root under a shared /tmp)
// is refused with the reason, never read.
func open(root paths.Root, id string) (*Session, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return nil, fmt.Errorf("%w %q", ErrNoSession, id)
	}
	if err := paths.CheckDir(root.Sessions(), paths.Owner()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w %s (cordon session ls)", ErrNoSession, id)
		}
		return nil, &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s: %v", id, errdefs.Message(err))}
	}
	si, err := wire.Read(root.Sessions(), id)
	if errors.Is(err, paths.ErrUnsafe) {
		return nil, &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s: %v", id, errdefs.Message(err))}
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s (cordon session ls)", ErrNoSession, id)
	}
	return &Session{info: si, root: root}, nil
}

// ID is the session's id (its run id in the audit log).
func (s *Session) ID() string { return s.info.ID }

// Info is what the supervisor published about the session.
func (s *Session) Info() wire.Info { return s.info }

func (s *Session) dial(ctx context.Context) (net.Conn, error) {
	// The supervisor runs as this user: a socket another uid answers on is not it.
	c, err := paths.DialSocket(ctx, s.root.SessionSocket(s.info.ID), paths.Owner())
	if errors.Is(err, paths.ErrUnsafe) {
		return nil, &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s: %v", s.info.ID, errdefs.Message(err))}
	}
	if err != nil {
		if !s.info.Alive() {
			return nil, &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s is dead (its supervisor is gone); cordon gc removes what it left", s.info.ID)}
		}
		return nil, &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s: %v", s.info.ID, err)}
	}
	return c, nil
}

// ExecOptions configure one command. Zero fields mean defaults.
type ExecOptions struct {
	Dir     string        // working directory inside; "" means the contract's workdir
	Timeout time.Duration // overrides commands.timeout when positive
	// Cap keeps at most Cap characters of each of stdout and stderr; the rest is in a
	// spill file inside the sandbox, named by the result and by a last line of the
	// cut output. 0: no cap; at most wire.MaxCap.
	Cap   int
	Stdin io.Reader // nil: an empty stdin
	// Stdout and Stderr receive the (capped) output as it comes. When nil, it is
	// buffered into the wire.Result instead.
	Stdout, Stderr io.Writer
}

// Exec runs argv in the session. A command that ran is never an error, whatever its
// exit code; an *Error reports that cordon could not run it (denied, session gone).
// Cancelling ctx ends the command.
func (s *Session) Exec(ctx context.Context, argv []string, o ExecOptions) (*wire.Result, error) {
	c, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	req := wire.Request{Op: "exec", Argv: argv, Dir: o.Dir, TimeoutMS: o.Timeout.Milliseconds(), Cap: o.Cap, Stdin: o.Stdin != nil}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, err
	}
	if o.Stdin != nil {
		go sendStdin(c, o.Stdin)
	}
	return ReadExec(ctx, c, s.info.ID, o)
}

// sendStdin forwards r as Input lines, then EOF.
func sendStdin(c net.Conn, r io.Reader) {
	enc := json.NewEncoder(c)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if enc.Encode(wire.Input{Data: buf[:n]}) != nil {
				return
			}
		}
		if err != nil {
			_ = enc.Encode(wire.Input{EOF: true})
			return
		}
	}
}

// Turn is what Sweep reports about the turn it ends.
type Turn struct {
	Removed int      // spill files deleted
	Changed []string // workspace paths changed since the previous Sweep, sorted
	// More counts the changes past the supervisor's bounds of a turn's list (10000
	// paths, 512 KiB), not in Changed: not 0, Changed is incomplete.
	More int
}

// Sweep ends an agent's turn: it deletes the session's spill files and returns how
// many it removed, with the workspace paths the turn's commands changed (volatile facts
// a harness appends to its next request rather than to its system prompt).
func (s *Session) Sweep(ctx context.Context) (Turn, error) {
	f, err := s.simple(ctx, wire.Request{Op: "sweep"})
	return Turn{Removed: f.Removed, Changed: f.Changed, More: f.More}, err
}

// Stop stops the session: running commands end, credentials are revoked, the sandbox
// and its services are torn down and the log is sealed. It returns once all that is
// done.
func (s *Session) Stop(ctx context.Context) error {
	_, err := s.simple(ctx, wire.Request{Op: "stop"})
	return err
}

// Checkpoint keeps a staged session's workspace as it is now, under name ("" for a
// numbered one), until the session stops.
func (s *Session) Checkpoint(ctx context.Context, name string) (wire.Checkpoint, []string, error) {
	f, err := s.simple(ctx, wire.Request{Op: "checkpoint", Name: name})
	if err != nil || f.Checkpoint == nil {
		return wire.Checkpoint{}, nil, err
	}
	return *f.Checkpoint, f.Problems, nil
}

// Rollback makes a staged session's workspace what it was at checkpoint to (a name,
// a number, or "-K": the K-th latest automatic one) and returns it, the paths it
// changed and what it could not restore.
func (s *Session) Rollback(ctx context.Context, to string) (wire.Checkpoint, []string, []string, error) {
	f, err := s.simple(ctx, wire.Request{Op: "rollback", Name: to})
	if err != nil || f.Checkpoint == nil {
		return wire.Checkpoint{}, nil, f.Problems, err
	}
	return *f.Checkpoint, f.Changed, f.Problems, nil
}

func (s *Session) simple(ctx context.Context, req wire.Request) (wire.Frame, error) {
	op := req.Op
	c, err := s.dial(ctx)
	if err != nil {
		return wire.Frame{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return wire.Frame{}, s.unanswered(ctx, op, err)
	}
	var f wire.Frame
	if err := newLineReader(c).decode(&f); err != nil {
		return f, s.unanswered(ctx, op, err)
	}
	if f.Error != "" {
		return f, frameError(f)
	}
	return f, nil
}

// unanswered is the error of a request op whose connection ended without an answer
// (err). A stop can race the session's end: a connection still waiting to be taken
// when the supervisor closes its socket (the last step of a teardown, another stop's
// or the session's own) is dropped. Once the socket is gone, that is what it says.
func (s *Session) unanswered(ctx context.Context, op string, err error) error {
	if op == "stop" && s.socketGone(ctx) {
		return &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s ended as this stop reached it (torn down by another stop, or on its own): `cordon audit show %s` says how", s.info.ID, s.info.ID)}
	}
	return &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s: no answer to %s: %v", s.info.ID, op, err)}
}

// socketGone waits a little for the session's socket to go, which the supervisor
// removes as it ends, and reports whether it did.
func (s *Session) socketGone(ctx context.Context) bool {
	deadline := time.Now().Add(socketGoneWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if _, err := os.Lstat(s.root.SessionSocket(s.info.ID)); errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(wait)
	}
}

// socketGoneWait bounds socketGone's wait: a supervisor that dropped a connection
// while it ended removes its socket within milliseconds.
const socketGoneWait = 2 * time.Second
