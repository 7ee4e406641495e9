package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// MaxOutput bounds an operation's combined output kept in its Outcome.
const MaxOutput = 1 << 20

// Exit statuses of operations that did not run to their own end.
const (
	exitCannotRun = errdefs.ExitCannotRun // refused or failed before it started
	exitTimeout   = errdefs.ExitTimeout   // killed at the gate's timeout
	exitNotFound  = 127                   // the program does not exist
)

// revokeTimeout bounds a credential's revocation after the operation.
const revokeTimeout = 30 * time.Second

// perform runs r's approved operation on the host and reports it as gate.exec.
func (s *Service) perform(ctx context.Context, r *request) Outcome {
	g := r.gate
	ev := event.GateExecBody{ID: r.p.ID, Gate: g.Name, Argv: r.p.Argv, Credential: credName(g)}
	start := time.Now()
	out, err := s.run(ctx, r, &ev)
	if err != nil {
		out = Outcome{ExitCode: exitCannotRun, Output: "cordon: gate " + g.Name + ": " + err.Error() + "\n"}
		ev.Reason = err.Error()
	}
	out.DurationMS = time.Since(start).Milliseconds()
	ev.ExitCode, ev.DurationMS = out.ExitCode, out.DurationMS
	s.emit(event.GateExec, r.p.Cmd, ev)
	s.cfg.Log.Info("gate operation ended", logKeyGate, g.Name, logKeyID, r.p.ID, "exit_code", out.ExitCode)
	return out
}

// run mints the credential, checks the repository, runs the operation and revokes.
// An error means the operation did not run.
func (s *Service) run(ctx context.Context, r *request, ev *event.GateExecBody) (out Outcome, err error) {
	g := r.gate
	if s.cfg.Before != nil {
		if err := s.cfg.Before(ctx); err != nil {
			return Outcome{}, err
		}
	}
	home, err := os.MkdirTemp("", "cordon-gate-")
	if err != nil {
		return Outcome{}, fmt.Errorf("creating a home directory: %w", err)
	}
	defer os.RemoveAll(home)
	dir, argv, env := s.cfg.Workspace, r.p.Argv, hardenedEnv(home, s.cfg.Workspace, g.Credential)
	if r.push != nil {
		if dir, argv, env, err = s.preparePush(ctx, r.push, home, g.Credential); err != nil {
			return Outcome{}, err
		}
	}
	if g.Credential != nil {
		if s.cfg.Mint == nil {
			return Outcome{}, fmt.Errorf("no provider can mint %s", g.Credential.Name)
		}
		cenv, revoke, err := s.cfg.Mint(ctx, *g.Credential)
		if err != nil {
			return Outcome{}, fmt.Errorf("minting %s: %w", g.Credential.Name, err)
		}
		defer func() {
			if rerr := s.revoke(ctx, revoke); rerr != nil {
				ev.Reason = fmt.Sprintf("revoking %s: %v", g.Credential.Name, rerr)
			}
		}()
		env = append(env, cenv...)
	}
	tctx, cancel := context.WithTimeout(ctx, time.Duration(g.Timeout))
	defer cancel()
	out, n, timedOut := execute(tctx, s.cfg.Policy, dir, argv, env)
	ev.OutputBytes, ev.TimedOut = n, timedOut
	return out, nil
}

// preparePush checks that the repository's refs are as they were when p was pinned;
// it returns where and how the push runs: in the scratch repository made when it was
// pinned, whose objects are those the approver was shown.
func (s *Service) preparePush(ctx context.Context, p *push, home string, cred *contract.Credential) (string, []string, []string, error) {
	rr, err := readRefs(filepath.Join(s.cfg.Workspace, ".git"))
	if err != nil {
		return "", nil, nil, err
	}
	if what := moved(p.state, rr.state()); what != "" {
		return "", nil, nil, fmt.Errorf("refused: the repository changed since the request (%s); what was shown is not what would be pushed: ask again", what)
	}
	if packs, err := packsOf(s.cfg.Workspace); err != nil || packs != p.packs {
		return "", nil, nil, errors.New("refused: the repository's objects/pack changed since the request; what was shown is not what would be pushed: ask again")
	}
	return p.home, p.argv(), p.scratchEnv(hardenedEnv(home, "", cred, p.overrides()...)), nil
}

// revoke calls revoke once, ignoring the operation's cancellation.
func (s *Service) revoke(ctx context.Context, revoke func(context.Context) error) error {
	if revoke == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
	defer cancel()
	err := revoke(rctx)
	if err != nil {
		s.cfg.Log.Error("revoking a gate credential", logKeyErr, err)
	}
	return err
}

// execute runs argv in dir with exactly env, bounded by ctx (the whole process group
// is killed when it ends). It returns the outcome, the total output length and whether
// the timeout fired.
func execute(ctx context.Context, pol hostexec.Policy, dir string, argv, env []string) (Outcome, int64, bool) {
	// Resolved in the operation's PATH, not cordon's, checked, and run through the
	// descriptor checked (package hostexec); what the check refuses does not run.
	prog, err := hostexec.Resolve(argv[0], envPath(env), pol)
	if err != nil {
		code := exitCannotRun
		if errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return Outcome{ExitCode: code, Output: "cordon: " + err.Error() + "\n"}, 0, false
	}
	defer prog.Close()
	cmd := prog.Command(ctx, argv[1:], env)
	cmd.Dir = dir
	out := &boundedBuffer{max: MaxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	code, waited := errdefs.ProcessCode(err)
	switch {
	case timedOut:
		code = exitTimeout
		out.note("cordon: the operation was killed at its timeout\n")
	case waited:
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
		code = exitNotFound
		out.note("cordon: " + err.Error() + "\n")
	case err != nil:
		code = exitCannotRun
		out.note("cordon: " + err.Error() + "\n")
	}
	return Outcome{ExitCode: code, Output: out.String()}, out.total, timedOut
}

// envPath is the PATH of env (the operation's, not cordon's own).
func envPath(env []string) string {
	for _, e := range env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			return p
		}
	}
	return ""
}

// boundedBuffer keeps the first max bytes written and counts the rest. The operation's
// stdout and stderr share one, so exec serialises the writes.
type boundedBuffer struct {
	buf   bytes.Buffer
	max   int
	total int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *boundedBuffer) note(s string) { b.buf.WriteString(s) }

func (b *boundedBuffer) String() string {
	s := b.buf.String()
	if b.total > int64(b.max) {
		s += fmt.Sprintf("\ncordon: output truncated: %d of %d bytes shown\n", b.max, b.total)
	}
	return s
}

func isGit(argv []string) bool {
	return len(argv) > 0 && (argv[0] == "git" || strings.HasSuffix(argv[0], "/git"))
}

// pathEnv is the operation's PATH.
const pathEnv = contract.DefaultPath
