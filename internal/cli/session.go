package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/runner"
)

// A session is one run kept open by a supervisor process (`cordon internal supervise`)
// that listens on RUNROOT/sessions/ID.sock. The protocol is in docs/sessions.md:
// one JSON request line per connection, answered by JSON lines, each either an output
// chunk ({"fd":1|2,"data":BASE64}) or, last, the outcome ({"result":{...}} or
// {"error":"...","code":N}).

// sessionRequest is the one line a client sends.
type sessionRequest struct {
	Op        string   `json:"op"` // "exec" or "stop"
	Argv      []string `json:"argv,omitempty"`
	Dir       string   `json:"dir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
}

// sessionFrame is one line of the supervisor's answer.
type sessionFrame struct {
	FD     int         `json:"fd,omitempty"`
	Data   []byte      `json:"data,omitempty"`
	Result *execResult `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
	Code   int         `json:"code,omitempty"` // cordon's exit status with Error
	Done   bool        `json:"done,omitempty"` // answer to stop
}

// execResultVersion versions the --json object of `cordon exec`.
const execResultVersion = 1

// execResult is the outcome of one exec; with stdout and stderr filled in by the client
// it is `cordon exec --json`'s output.
type execResult struct {
	V            int      `json:"v"`
	Session      string   `json:"session"`
	Cmd          string   `json:"cmd"`
	ExitCode     int      `json:"exit_code"`
	Stdout       string   `json:"stdout"`
	Stderr       string   `json:"stderr"`
	DurationMS   int64    `json:"duration_ms"`
	TimedOut     bool     `json:"timed_out"`
	Reason       string   `json:"reason"`
	Diffstat     diffstat `json:"diffstat"`
	DeniedEgress []string `json:"denied_egress"`
}

type diffstat struct {
	Files      int `json:"files"`
	Insertions int `json:"insertions"`
	Deletions  int `json:"deletions"`
}

// sessionInfo is RUNROOT/sessions/ID.json.
type sessionInfo struct {
	ID        string    `json:"id"`
	PID       int       `json:"pid"`
	Start     uint64    `json:"start"` // process start time in ticks, against pid reuse
	Started   time.Time `json:"started"`
	Contract  string    `json:"contract"`
	Backend   string    `json:"backend"`
	Workspace string    `json:"workspace"`
	AuditDir  string    `json:"audit_dir"`
}

func (s sessionInfo) alive() bool { return s.PID > 0 && linux.ProcessStart(s.PID) == s.Start }

func sessionsDir() string { return runner.SessionsDir(runner.DefaultRunRoot()) }

func sessionCmd(ctx context.Context, stdio IO, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdio.Stderr, "Usage: cordon session start [-c FILE] [--backend B] [--audit-dir DIR]\n       cordon session ls\n       cordon session stop SESSION")
		if len(args) == 0 {
			return &ExitError{Code: 2}
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
	}
	return &ExitError{Code: 2, Msg: fmt.Sprintf("session: unknown subcommand %q (start, ls, stop)", args[0])}
}

// sessionStart spawns the supervisor, detached, and waits for it to say it is ready.
func sessionStart(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("session start", "session start [-c FILE] [--backend auto|bwrap|docker|containerd] [--audit-dir DIR]", stdio.Stderr)
	file := contractFlag(fs)
	backend := fs.String("backend", envOr("CORDON_BACKEND", "auto"), "sandbox `backend` ($CORDON_BACKEND)")
	auditDir := fs.String("audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &ExitError{Code: 2, Msg: "session start: unexpected arguments"}
	}
	fail := func(err error) error { return reportRunError(stdio, err) }
	dir := sessionsDir()
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
	sargs := []string{"internal", "supervise", "--ready-fd", "3", "--log", logPath, "--backend", *backend}
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
	fmt.Fprintf(stdio.Stderr, "cordon: %s\n", msg)
	return &ExitError{Code: 125}
}

func readSessions() []sessionInfo {
	matches, _ := filepath.Glob(filepath.Join(sessionsDir(), "*.json"))
	var out []sessionInfo
	for _, m := range matches {
		data, err := os.ReadFile(m)
		var si sessionInfo
		if err == nil && json.Unmarshal(data, &si) == nil && si.ID != "" {
			out = append(out, si)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func sessionLs(stdio IO, args []string) error {
	fs := newFlags("session ls", "session ls", stdio.Stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	for _, s := range readSessions() {
		state := "running"
		if !s.alive() {
			state = "dead (cordon gc removes it)"
		}
		fmt.Fprintf(stdio.Stdout, "%s\t%s\t%s\t%s\t%s\n", s.ID, state, s.Started.Local().Format(time.DateTime), s.Backend, s.Workspace)
	}
	return nil
}

func sessionStop(stdio IO, args []string) error {
	fs := newFlags("session stop", "session stop SESSION", stdio.Stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &ExitError{Code: 2, Msg: "session stop: give one SESSION"}
	}
	conn, _, err := dialSession(fs.Arg(0))
	if err != nil {
		return reportRunError(stdio, err)
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(sessionRequest{Op: "stop"}); err != nil {
		return reportRunError(stdio, err)
	}
	var f sessionFrame
	if err := json.NewDecoder(conn).Decode(&f); err != nil {
		return reportRunError(stdio, fmt.Errorf("session %s: no answer to stop: %v", fs.Arg(0), err))
	}
	if f.Error != "" {
		fmt.Fprintf(stdio.Stderr, "cordon: %s\n", f.Error)
		return &ExitError{Code: 125}
	}
	return nil
}

// dialSession connects to a session's supervisor.
func dialSession(id string) (net.Conn, sessionInfo, error) {
	var si sessionInfo
	if err := audit.ValidateRunID(id); err != nil {
		return nil, si, fmt.Errorf("no session %q", id)
	}
	data, err := os.ReadFile(filepath.Join(sessionsDir(), id+".json"))
	if err == nil {
		err = json.Unmarshal(data, &si)
	}
	if err != nil {
		return nil, si, fmt.Errorf("no session %s (cordon session ls)", id)
	}
	conn, err := net.Dial("unix", filepath.Join(sessionsDir(), id+".sock"))
	if err != nil {
		if !si.alive() {
			return nil, si, fmt.Errorf("session %s is dead (its supervisor is gone); cordon gc removes what it left", id)
		}
		return nil, si, fmt.Errorf("session %s: %v", id, err)
	}
	return conn, si, nil
}

// frameWriter sends what it is given as output chunks of fd.
type frameWriter struct {
	enc *lockedEncoder
	fd  int
}

func (w frameWriter) Write(p []byte) (int, error) {
	if err := w.enc.Encode(sessionFrame{FD: w.fd, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

var errStopped = errors.New("session stopped")
