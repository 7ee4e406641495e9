package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
)

// errAuditFailed is the cancellation cause when the audit log cannot be written.
var errAuditFailed = errors.New("audit log failed")

// execute runs one command: cmd.start, the command with its output captured, cmd.end,
// then the command's fs.diff.
func (r *run) execute(ctx context.Context, argv []string) error {
	tracker, err := fsdiff.New(ctx, r.plan.Workspace, fsdiff.Options{})
	if err != nil {
		return fmt.Errorf("%w: snapshotting the workspace for the audit diff: %v", errdefs.ErrUnavailable, err)
	}
	r.o.Log.Debug("workspace baseline taken", "files", tracker.Baseline().Files)
	cmdID, err := r.log.StartCmd(audit.CmdStart{Argv: argv, Cwd: r.plan.Workdir, Env: envNames(r.plan)})
	if err != nil {
		return fmt.Errorf("%w: writing the audit log: %v", errdefs.ErrUnavailable, err)
	}
	r.sink.setCmd(cmdID)
	timeout := time.Duration(r.plan.Timeout)
	if r.o.Timeout > 0 {
		timeout = r.o.Timeout
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	actx, stop := context.WithCancelCause(ectx)
	defer stop(nil)
	r.armKill(stop)
	go func() {
		select {
		case <-r.log.Failed():
			stop(errAuditFailed)
		case <-actx.Done():
		}
	}()
	out, errOut := audit.NewCapture(0), audit.NewCapture(0)
	began := r.o.now()
	code, err := r.sb.Exec(actx, Process{
		Argv: argv, Dir: r.plan.Workdir, Stdin: r.o.Stdin,
		Stdout: io.MultiWriter(r.o.Stdout, out), Stderr: io.MultiWriter(r.o.Stderr, errOut),
	})
	took := r.o.now().Sub(began)
	r.o.Log.Debug("command finished", "code", code, "err", err)
	// Drain the monitor while the command is still the current one, so that its last
	// alerts are joined to it.
	if merr := r.stopMonitor(); merr != nil {
		r.o.Log.Warn("stopping the monitor", "err", merr)
		fmt.Fprintf(r.o.Stderr, "cordon: warning: %v\n", merr)
	}
	code, reason, err := classify(ctx, actx, code, err)
	if err != nil {
		return err
	}
	switch reason {
	case audit.ReasonTimeout:
		fmt.Fprintf(r.o.Stderr, "cordon: command timed out after %s and was killed with everything it started (commands.timeout)\n", timeout)
	case audit.ReasonAuditFail:
		fmt.Fprintf(r.o.Stderr, "cordon: the audit log failed (%v); the command was stopped\n", r.log.Err())
	case audit.ReasonMonitor:
		fmt.Fprintf(r.o.Stderr, "cordon: %v (monitor.on_violation: kill)\n", context.Cause(actx))
	}
	r.log.Emit(event.Event{Type: event.CmdEnd, Cmd: cmdID, Body: audit.CmdEnd{
		ExitCode: code, DurationMS: took.Milliseconds(), Stdout: out.Output(), Stderr: errOut.Output(),
	}})
	r.o.Log.Debug("command recorded")
	res, derr := tracker.Diff(context.WithoutCancel(ctx))
	if derr == nil {
		derr = r.log.RecordDiff(cmdID, res)
	}
	if derr != nil {
		r.o.Log.Warn("recording the workspace diff", "err", derr)
	}
	r.sink.setCmd("")
	r.o.Log.Debug("diff recorded")
	detail := ""
	if reason == audit.ReasonMonitor {
		detail = context.Cause(actx).Error()
	}
	r.finish(code, reason, detail)
	return nil
}

func envNames(p *contract.Plan) []string {
	names := make([]string, 0, len(p.Env))
	for _, e := range p.Env {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	return names
}

// openAudit creates the run's log and writes run.start. An audit root that cannot be
// written, or that lies inside the workspace, refuses the run.
func openAudit(plan *contract.Plan, o *Options, runID string) (*audit.Writer, error) {
	root := o.AuditRoot
	if root == "" {
		var err error
		if root, err = audit.DefaultRoot(); err != nil {
			return nil, fmt.Errorf("%w: no audit root: %v (use --audit-dir)", errdefs.ErrUnavailable, err)
		}
	}
	if inside(root, plan.Workspace) {
		return nil, fmt.Errorf("%w: the audit root %s is inside the workspace %s; the log must be out of the sandbox's reach", errdefs.ErrInvalid, root, plan.Workspace)
	}
	red := audit.NewRedactor()
	for _, kv := range o.Secrets {
		if name, value, ok := strings.Cut(kv, "="); ok {
			_ = red.Add(name, value) // values too short to redact safely are refused
		}
	}
	host, _ := os.Hostname()
	w, err := audit.Create(root, runID, audit.Options{Redactor: red, Start: audit.RunStart{
		ContractPath: plan.ContractFile, ContractDigest: plan.ContractDigest,
		Backend: o.Backend.Name(), CordonVersion: o.Version, Host: host, User: userName(),
		Workspace: plan.Workspace,
	}})
	if err != nil {
		return nil, fmt.Errorf("%w: audit log: %v", errdefs.ErrUnavailable, err)
	}
	return w, nil
}

func inside(p, dir string) bool {
	if rp, err := resolveExistingPrefix(p); err == nil {
		p = rp
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func userName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}

// cmdSink stamps events that do not name a command with the one running now, so a
// reviewer can join a denied connection to the command that tried it, and copies every
// event to an optional second sink.
type cmdSink struct {
	next event.Sink
	copy event.Sink // may be nil

	mu  sync.Mutex // mu guards cmd.
	cmd string
}

func (s *cmdSink) setCmd(id string) {
	s.mu.Lock()
	s.cmd = id
	s.mu.Unlock()
}

// Emit implements event.Sink.
func (s *cmdSink) Emit(e event.Event) {
	if e.Cmd == "" {
		s.mu.Lock()
		e.Cmd = s.cmd
		s.mu.Unlock()
	}
	s.next.Emit(e)
	if s.copy != nil {
		s.copy.Emit(e)
	}
}
