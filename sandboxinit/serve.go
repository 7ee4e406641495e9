//go:build linux || darwin

package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// server runs a session's commands: each exec request is forked with the three file
// descriptors it carries as stdin, stdout and stderr, in a process group of its own;
// the reaper reports each command's status when its first process exits and reaps
// every orphan.
type server struct {
	c *ctl.Conn
	k *confiner // starts every command confined

	mu      sync.Mutex     // mu guards the maps, and is held across fork and insert.
	running map[int]uint64 // pid of a command's first process → exec id
	groups  map[uint64]int // exec id → its process group
}

// serve runs the host's commands until the control connection ends or pid1 is told to
// stop; then it kills everything left in the sandbox and exits 0.
//
// Signals do not stop it: a command could send them (it shares the uid), and the
// host ends a session by hanging up or by killing the sandbox from outside.
func serve(c *ctl.Conn, k *confiner) int {
	s := &server{c: c, k: k, running: map[int]uint64{}, groups: map[uint64]int{}}
	ignoreSignals()
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go s.reap(chld)
	_ = s.loop()
	c.Close()
	s.stopAll()
	return 0
}

func (s *server) loop() error {
	for {
		m, files, err := s.c.Recv()
		if err != nil {
			return err
		}
		switch m.Op {
		case ctl.OpExec:
			s.start(m, files)
		case ctl.OpSignal:
			s.mu.Lock()
			pgid := s.groups[m.ID]
			s.mu.Unlock()
			if pgid > 0 && m.Sig > 0 {
				_ = linux.KillGroup(pgid, syscall.Signal(m.Sig))
			}
			ctl.CloseFiles(files)
		default:
			ctl.CloseFiles(files)
		}
	}
}

// start forks one command, into the cgroup whose directory is the optional fourth
// descriptor. Failures before it runs are reported as its exit: 127 and 126 as a shell
// would (with the reason on its stderr), or Error for a request cordon should not have
// sent.
func (s *server) start(m ctl.Msg, files []*os.File) {
	defer ctl.CloseFiles(files)
	if len(files) < 3 || len(files) > ctl.MaxFiles || len(m.Argv) == 0 {
		_ = s.c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Error: "malformed exec request"})
		return
	}
	if fi, err := os.Stat(m.Dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		_ = s.c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Error: fmt.Sprintf("working directory %s: %v", m.Dir, errors.Unwrap(err))})
		return
	}
	path, err := lookPath(m.Argv[0], m.Dir)
	if err != nil {
		fmt.Fprintf(files[2], "cordon: %s: command not found in the sandbox\n", m.Argv[0])
		_ = s.c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Code: wire.ExitNotFound})
		return
	}
	_, err = s.fork(m, path, files)
	if err != nil {
		fmt.Fprintf(files[2], "cordon: %s: %v\n", m.Argv[0], err)
		code := wire.ExitNotExecutable
		if errors.Is(err, syscall.ENOENT) {
			code = wire.ExitNotFound
		}
		_ = s.c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Code: code})
	}
}

// lookPath finds argv[0] as a shell would from dir: a name with a slash is a path
// (relative to dir), any other is searched in PATH.
func lookPath(name, dir string) (string, error) {
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	return exec.LookPath(name)
}

// reap waits for children on every SIGCHLD and reports the commands among them.
func (s *server) reap(chld <-chan os.Signal) {
	for range chld {
		for {
			var ws syscall.WaitStatus
			pid, err := linux.WaitAny(&ws, syscall.WNOHANG)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			s.mu.Lock()
			id, ok := s.running[pid]
			if ok {
				delete(s.running, pid)
				delete(s.groups, id)
			}
			s.mu.Unlock()
			if !ok {
				continue // an orphan reparented to us: reaped
			}
			s.exited(pid)
			_ = s.c.Send(ctl.Msg{Op: ctl.OpExit, ID: id, Code: errdefs.WaitCode(ws)})
		}
	}
}

// dialControl dials the host's control socket, proves itself with the token and hands
// over files (the egress listener, on Linux), then waits for the host's ready: the host
// has taken them and checked them, and nothing of the command may run before that. The
// connection is a session's from then on; a one-command run closes it. files are
// closed as soon as they are sent (or cannot be): the host's copies are the only ones
// left while it checks them.
func dialControl(cc *wire.Control, files ...*os.File) (*ctl.Conn, error) {
	c, err := ctl.Dial(cc.Socket)
	if err != nil {
		ctl.CloseFiles(files)
		return nil, fmt.Errorf("control channel: %w", err)
	}
	err = c.Send(ctl.Msg{Op: ctl.OpHello, Token: cc.Token}, files...)
	ctl.CloseFiles(files) // sent or not, process 1 keeps none of them
	var m ctl.Msg
	if err == nil {
		var got []*os.File
		m, got, err = c.Recv()
		ctl.CloseFiles(got)
	}
	if err == nil && m.Op != ctl.OpReady {
		err = fmt.Errorf("%q where the host's ready was due", m.Op)
	}
	if err != nil {
		c.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
			err = errors.New("the host hung up without taking the sandbox (see cordon's error)")
		}
		return nil, fmt.Errorf("control channel: %w", err)
	}
	return c, nil
}

// report writes pid1's one status line, saying err if there is one, and closes
// status. It reports whether process 1 may go on: no error, and the line written.
//
// times, when set (Spec.Trace), go with it.
func report(status *os.File, err error, times *wire.Times) bool {
	st := wire.Status{OK: err == nil, Times: times}
	if err != nil {
		st.Error = err.Error()
	}
	line, _ := json.Marshal(st)
	_, werr := status.Write(append(line, '\n'))
	status.Close()
	return err == nil && werr == nil
}

// readSpec reads the host's Spec from f to its end and closes f.
func readSpec(f *os.File) (wire.Spec, error) {
	var spec wire.Spec
	data, err := io.ReadAll(f)
	f.Close()
	if err == nil {
		err = json.Unmarshal(data, &spec)
	}
	return spec, err
}

// commandAttr is how a session command is started: in its working directory, with
// process 1's environment (the host's payload), the request's three descriptors as its
// stdio, in a process group of its own.
func commandAttr(m ctl.Msg, files []*os.File) *syscall.ProcAttr {
	return &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   os.Environ(),
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
}

// startTimes are pid1's start-up times for Spec.Trace, the spec read now; nil (and
// marking nothing) when the host does not trace.
func startTimes(traced bool, began time.Time) *startupTimes {
	if !traced {
		return nil
	}
	t := &startupTimes{Main: began.UnixNano(), Spec: time.Now().UnixNano()}
	if start, ok := trace.ProcessStart(); ok {
		t.Start = start.UnixNano()
	}
	return t
}

// startupTimes are the [wire.Times] pid1 is taking.
type startupTimes wire.Times

// checked and dialed mark those steps now, when t is being taken.
func (t *startupTimes) checked() {
	if t != nil {
		t.Checked = time.Now().UnixNano()
	}
}

func (t *startupTimes) dialed() {
	if t != nil {
		t.Dialed = time.Now().UnixNano()
	}
}

// report is t for the Status, or nil.
func (t *startupTimes) report() *wire.Times { return (*wire.Times)(t) }
