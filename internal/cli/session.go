package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// A session is one run kept open by a supervisor process (`cordon internal supervise`)
// that listens on RUNROOT/sessions/ID.sock; the protocol and its types are package
// session/wire's (docs/sessions.md).

func sessionCmd(ctx context.Context, stdio IO, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdio.Stderr, "Usage: cordon session start [-c FILE] [--backend B] [--audit-dir DIR] [--gates ask|deny]\n       cordon session ls\n       cordon session sweep SESSION\n       cordon session stop SESSION")
		if len(args) == 0 {
			return errdefs.Exit(errdefs.ExitUsage)
		}
		return nil
	}
	switch args[0] {
	case "start":
		return sessionStart(ctx, stdio, args[1:])
	case "ls":
		return sessionLs(stdio, args[1:])
	case "stop":
		return sessionStop(stdio, args[1:])
	case "sweep":
		return sessionSweep(stdio, args[1:])
	}
	return errdefs.Usagef("session: unknown subcommand %q (start, ls, sweep, stop)", args[0])
}

// sessionStart spawns the supervisor, detached, and waits for it to say it is ready.
func sessionStart(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("session start", "session start [-c FILE] [--backend auto|bwrap|docker|containerd] [--audit-dir DIR]", stdio.Stderr)
	file := contractFlag(fs)
	backend := fs.String("backend", envOr("CORDON_BACKEND", "auto"), "sandbox `backend` ($CORDON_BACKEND)")
	auditDir := fs.String("audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR)")
	gates := gatesFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errdefs.Usagef("session start: unexpected arguments")
	}
	fail := func(err error) error { return reportRunError(stdio, err) }
	dir := paths.RunRoot().Sessions()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fail(err)
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	logPath := filepath.Join(dir, fmt.Sprintf("starting-%d.log", time.Now().UnixNano()))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer readyR.Close()
	sargs := []string{"internal", "supervise", "--ready-fd", "3", "--log", logPath, "--backend", *backend, "--gates", gates.String()}
	if *file != "" {
		abs, err := filepath.Abs(*file)
		if err != nil {
			return fail(err)
		}
		sargs = append(sargs, "-c", abs)
	}
	if *auditDir != "" {
		sargs = append(sargs, "--audit-dir", *auditDir)
	}
	cmd := exec.Command(self, sargs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fail(err)
	}
	line, _ := bufio.NewReader(readyR).ReadString('\n')
	_ = cmd.Process.Release()
	line = strings.TrimSpace(line)
	if id, ok := strings.CutPrefix(line, "ok "); ok {
		fmt.Fprintln(stdio.Stdout, id)
		return nil
	}
	msg := strings.TrimPrefix(line, "error ")
	if msg == "" {
		data, _ := os.ReadFile(logPath)
		msg = "the session supervisor exited before it was ready: " + strings.TrimSpace(string(data))
	}
	os.Remove(logPath)
	return clientError(stdio, errors.New(msg))
}

func sessionLs(stdio IO, args []string) error {
	fs := newFlags("session ls", "session ls", stdio.Stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	for _, s := range wire.List(paths.RunRoot().Sessions()) {
		state := "running"
		if !s.Alive() {
			state = "dead (cordon gc removes it)"
		}
		fmt.Fprintf(stdio.Stdout, "%s\t%s\t%s\t%s\t%s\n", s.ID, state, s.Started.Local().Format(time.DateTime), s.Backend, s.Workspace)
	}
	return nil
}

// sessionSweep ends an agent's turn: it deletes the session's spill files and prints
// the workspace paths changed since the last sweep, one per line (--json: an object).
func sessionSweep(stdio IO, args []string) error {
	fs := newFlags("session sweep", "session sweep [--json] SESSION", stdio.Stderr)
	asJSON := fs.Bool("json", false, `print {"removed": N, "changed": [PATH...]}`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errdefs.Usagef("session sweep: give one SESSION")
	}
	sess, err := session.Open(fs.Arg(0))
	if err != nil {
		return clientError(stdio, err)
	}
	turn, err := sess.Sweep(context.Background())
	if err != nil {
		return clientError(stdio, err)
	}
	if *asJSON {
		if turn.Changed == nil {
			turn.Changed = []string{}
		}
		return json.NewEncoder(stdio.Stdout).Encode(struct {
			Removed int      `json:"removed"`
			Changed []string `json:"changed"`
		}{turn.Removed, turn.Changed})
	}
	for _, p := range turn.Changed {
		fmt.Fprintln(stdio.Stdout, p)
	}
	fmt.Fprintf(stdio.Stderr, "cordon: removed %d spill file(s); %d path(s) changed this turn\n", turn.Removed, len(turn.Changed))
	return nil
}

// clientError reports a session client's failure on one line: 125 (cordon could not
// do it) unless the supervisor said otherwise (a [session.Error] carries its status).
func clientError(stdio IO, err error) error {
	err = errdefs.CannotRun(err)
	fmt.Fprintf(stdio.Stderr, "cordon: %s\n", errdefs.Message(err))
	return errdefs.Reported(err)
}

func sessionStop(stdio IO, args []string) error {
	fs := newFlags("session stop", "session stop SESSION", stdio.Stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errdefs.Usagef("session stop: give one SESSION")
	}
	sess, err := session.Open(fs.Arg(0))
	if err == nil {
		err = sess.Stop(context.Background())
	}
	if err != nil {
		return clientError(stdio, err)
	}
	return nil
}
