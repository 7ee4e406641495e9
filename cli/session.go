package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/cli/execcli"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/session/wire"
)

// A session is one run kept open by a supervisor process (`cordon internal supervise`)
// that listens on RUNROOT/sessions/ID.sock; the protocol and its types are package
// session/wire's (docs/sessions.md).

func newSessionCmd(stdio IO) *cobra.Command {
	c := group(stdio, &cobra.Command{
		Use:   "session COMMAND",
		Short: "start, list and stop sessions (one sandboxed run, many commands)",
		Long: `A session is one run kept open for many commands (cordon exec), in one sandbox, set up
once by cordon session start and torn down once by cordon session stop (docs/sessions.md).`,
		Example: `  id=$(cordon session start -c cordon.yaml)
  cordon exec $id -- go build ./...
  cordon session sweep --json $id
  cordon session ls --json
  cordon session stop $id`,
	})
	c.AddCommand(newSessionStartCmd(stdio), newSessionLsCmd(stdio), newSessionSweepCmd(stdio), newSessionStopCmd(stdio),
		newSessionCheckpointCmd(stdio), newSessionRollbackCmd(stdio))
	return c
}

// sessionStartOptions are cordon session start's flags.
type sessionStartOptions struct {
	file, backend, auditDir string
	gates                   *gate.Mode
	stage                   bool
	workspace               string // with --host: the server workspace's name
	pool                    string // with --host: the server pool to claim from
}

func newSessionStartCmd(stdio IO) *cobra.Command {
	var o sessionStartOptions
	c := &cobra.Command{
		Use:   "start [flags]",
		Short: "start a session and print its id",
		Long: `Starts a session's supervisor, detached, waits until its sandbox is ready and prints the
session's id. Exit status: 0 started; 125 when it could not be (the reason on stderr).`,
		Example: `  id=$(cordon session start)
  id=$(cordon session start -c agent.yaml --backend docker --gates deny)`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if hostOf(c).Host != "" {
				return sessionStartRemote(c, stdio, o)
			}
			if o.workspace != "" {
				return errdefs.Usagef("session start: --workspace names a server's workspace and needs --host; here the workspace is the current directory")
			}
			if o.pool != "" {
				return errdefs.Usagef("session start: --pool names a server's warm pool and needs --host")
			}
			return sessionStart(stdio, o)
		},
	}
	f := c.Flags()
	contractFlag(f, &o.file)
	backendFlag(f, &o.backend)
	f.StringVar(&o.auditDir, "audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR)")
	o.gates = gatesFlag(f)
	f.StringVar(&o.workspace, "workspace", "", "with --host: the server workspace `NAME` the session works in (made empty when missing); none: a new workspace, claimed from a warm pool of the base contract when the start names no contract, pool or --stage")
	f.StringVar(&o.pool, "pool", "", "with --host: claim the session from the server's warm pool `NAME` (started cold on the pool's contract when none is ready); not with -c, --workspace or --stage")
	f.BoolVar(&o.stage, "stage", false, "stage the workspace: writes go to an overlay, with checkpoints and rollback, applied or discarded after stop (docs/sessions.md)")
	return c
}

// sessionStart spawns the supervisor, detached, and waits for it to say it is ready.
func sessionStart(stdio IO, o sessionStartOptions) error {
	id, err := spawnSupervisor(o, nil)
	if err != nil {
		return reportStartError(stdio, err)
	}
	fmt.Fprintln(stdio.Stdout, id)
	return nil
}

// errSupervisor is a supervisor's own refusal to start, already worded for the user.
type errSupervisor struct{ msg string }

func (e *errSupervisor) Error() string { return e.msg }

// reportStartError reports spawnSupervisor's error as cordon session start does.
func reportStartError(stdio IO, err error) error {
	var sup *errSupervisor
	if errors.As(err, &sup) {
		return clientError(stdio, errors.New(sup.msg))
	}
	return reportRunError(stdio, err)
}

// spawnSupervisor starts a session's supervisor, detached, waits until it is ready
// and returns the session's id. With hold, the supervisor stops the session (as
// cordon session stop does) when hold's other end closes: when the process holding
// it ends, however it ends (cordon mcp). Its error is a run error (reportRunError),
// or an *errSupervisor.
func spawnSupervisor(o sessionStartOptions, hold *os.File) (string, error) {
	dir := paths.RunRoot().Sessions()
	// Made, or checked, all the way up: under a shared /tmp another user may have made
	// the run root's parent first, to swap in a socket and record of its own.
	if err := paths.MakeDir(dir, paths.Owner()); err != nil {
		return "", fmt.Errorf("sessions directory: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	logPath := filepath.Join(dir, fmt.Sprintf("starting-%d.log", time.Now().UnixNano()))
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer readyR.Close()
	sargs := []string{"internal", "supervise", "--ready-fd", "3", "--log", logPath, "--backend", o.backend, "--gates", o.gates.String()}
	if o.file != "" {
		abs, err := filepath.Abs(o.file)
		if err != nil {
			return "", err
		}
		sargs = append(sargs, "-c", abs)
	}
	if o.auditDir != "" {
		sargs = append(sargs, "--audit-dir", o.auditDir)
	}
	if o.stage {
		sargs = append(sargs, "--stage")
	}
	cmd := exec.Command(self, sargs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{readyW}
	if hold != nil {
		cmd.Args = append(cmd.Args, "--hold-fd", "4")
		cmd.ExtraFiles = append(cmd.ExtraFiles, hold)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return "", err
	}
	line, _ := bufio.NewReader(readyR).ReadString('\n')
	_ = cmd.Process.Release()
	line = strings.TrimSpace(line)
	if id, ok := strings.CutPrefix(line, "ok "); ok {
		return id, nil
	}
	msg := strings.TrimPrefix(line, "error ")
	if msg == "" {
		data, _ := os.ReadFile(logPath)
		msg = "the session supervisor exited before it was ready: " + strings.TrimSpace(string(data))
	}
	os.Remove(logPath)
	return "", &errSupervisor{msg}
}

func newSessionLsCmd(stdio IO) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls [flags]",
		Short: "list this host's sessions",
		Long:  "Lists the sessions of this run root: id, state, start time, backend and workspace.",
		Example: `  cordon session ls
  cordon session ls --json | jq -r '.sessions[] | select(.alive) | .id'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if hostOf(c).Host != "" {
				return sessionLsRemote(c, stdio, asJSON)
			}
			return sessionLs(stdio, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaSessionLs+`", "sessions": [{id, alive, state, started, backend, workspace, contract}]}`)
	return c
}

// sessionJSON is one session in `cordon session ls --json`.
type sessionJSON struct {
	ID        string    `json:"id"`
	Alive     bool      `json:"alive"` // its supervisor lives
	State     string    `json:"state"` // "running", or "dead" (cordon gc removes it)
	Started   time.Time `json:"started"`
	Backend   string    `json:"backend"`
	Workspace string    `json:"workspace"`
	Contract  string    `json:"contract"` // "" for the built-in default
	// Ended is why a server's session ended when its supervisor died (its log sealed
	// by the server's collection); empty otherwise.
	Ended  string `json:"ended,omitempty"`
	remote bool   // a server's: the server collects its dead sessions, not the caller's gc
}

func sessionLs(stdio IO, asJSON bool) error {
	out := []sessionJSON{}
	dir := paths.RunRoot().Sessions()
	// wire.List shows nothing of a directory it cannot trust; say why instead.
	if err := paths.CheckDir(dir, paths.Owner()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return reportRunError(stdio, fmt.Errorf("sessions directory: %w", err))
	}
	for _, s := range wire.List(dir) {
		j := sessionJSON{ID: s.ID, Alive: s.Alive(), State: "running", Started: s.Started, Backend: s.Backend, Workspace: s.Workspace, Contract: s.Contract}
		if !j.Alive {
			j.State = "dead"
		}
		out = append(out, j)
	}
	return printSessions(stdio, out, asJSON)
}

// printSessions prints session ls's list: one line each, or the --json document.
func printSessions(stdio IO, out []sessionJSON, asJSON bool) error {
	if asJSON {
		return writeJSON(stdio.Stdout, struct {
			Schema   string        `json:"schema"`
			Sessions []sessionJSON `json:"sessions"`
		}{schemaSessionLs, out})
	}
	for _, s := range out {
		state := s.State
		switch {
		case s.Ended != "":
			state += " (" + s.Ended + ")"
		case state == "dead" && s.remote:
			state = "dead (the server collects it)"
		case state == "dead":
			state = "dead (cordon gc removes it)"
		}
		// A server's answer is not to be trusted with the terminal.
		fmt.Fprintf(stdio.Stdout, "%s\t%s\t%s\t%s\t%s\n", termtext.Line(s.ID), termtext.Line(state), s.Started.Local().Format(time.DateTime),
			termtext.Line(s.Backend), termtext.Line(s.Workspace))
	}
	return nil
}

func newSessionSweepCmd(stdio IO) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "sweep [flags] SESSION",
		Short: "end an agent's turn: delete spill files, print the paths changed",
		Long: `Ends an agent's turn: deletes the session's spill files and prints the workspace paths
changed since the last sweep, one per line.`,
		Example: `  cordon session sweep $id
  cordon session sweep $id --json`,
		ValidArgsFunction: completeSessions,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errdefs.Usagef("session sweep: give one SESSION")
			}
			return sessionSweep(c, stdio, args[0], asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaSessionSweep+`", "removed": N, "changed": [PATH...]}`)
	return c
}

// sessionSweep ends an agent's turn: it deletes the session's spill files and prints
// the workspace paths changed since the last sweep, one per line (--json: an object).
func sessionSweep(c *cobra.Command, stdio IO, id string, asJSON bool) error {
	sess, err := openSession(c, id)
	if err != nil {
		return clientError(stdio, err)
	}
	turn, err := sess.Sweep(c.Context())
	if err != nil {
		return clientError(stdio, err)
	}
	if asJSON {
		if turn.Changed == nil {
			turn.Changed = []string{}
		}
		return json.NewEncoder(stdio.Stdout).Encode(struct {
			Schema  string   `json:"schema"`
			Removed int      `json:"removed"`
			Changed []string `json:"changed"`
			More    int      `json:"more"`
		}{schemaSessionSweep, turn.Removed, turn.Changed, turn.More})
	}
	for _, p := range turn.Changed {
		fmt.Fprintln(stdio.Stdout, p)
	}
	fmt.Fprintf(stdio.Stderr, "cordon: removed %d spill file(s); %d path(s) changed this turn\n", turn.Removed, len(turn.Changed))
	if turn.More > 0 {
		fmt.Fprintf(stdio.Stderr, "cordon: truncated: %d more change(s) not listed (a turn lists at most 10000 paths, 512 KiB)\n", turn.More)
	}
	return nil
}

// clientError reports a session client's failure on one line: 125 (cordon could not
// do it) unless the supervisor said otherwise (a [session.Error] carries its status).
func clientError(stdio IO, err error) error { return execcli.ReportError(stdio.Stderr, err) }

func newSessionStopCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:               "stop SESSION",
		Short:             "stop a session: revoke, tear down, seal the log",
		Long:              "Stops session SESSION: revokes its credentials, tears its sandbox down and seals its audit log.",
		Example:           `  cordon session stop $id`,
		ValidArgsFunction: completeSessions,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errdefs.Usagef("session stop: give one SESSION")
			}
			sess, err := openSession(c, args[0])
			if err == nil {
				err = sess.Stop(c.Context())
			}
			if err != nil {
				return clientError(stdio, err)
			}
			return nil
		},
	}
}
