package sandboxinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/ctlmux"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// PodAttachWait bounds how long a Pod's process 1 waits for cordon to attach: a Pod
// nobody attaches to ends (status [wire.ExitSelfCheck]) rather than idle.
const PodAttachWait = 10 * time.Minute

// PodInitMain is `internal init --pod SOCKET`: process 1 of a Kubernetes Pod that the
// kubernetes placement (placement/kubernetes) created. It holds no capability, so it
// cannot make a network namespace itself: it starts the Pod's real init (`internal
// init --pod-inner SOCKET`, [podInnerMain]) in a new user namespace owning a new,
// empty network namespace (podnetns_linux.go), forwards it every signal, and exits
// with its status once it has killed whatever is left of the Pod.
func PodInitMain(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintln(os.Stderr, "usage: cordon internal init --pod /ABSOLUTE/SOCKET")
		return wire.ExitSelfCheck
	}
	if err := linux.CloseOnExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return wire.ExitSelfCheck
	}
	return runInEmptyNetns([]string{"internal", InitArg, podInnerFlag, args[0]})
}

// podInnerMain is `internal init --pod-inner SOCKET`, started by [PodInitMain] in
// an empty network namespace, where it holds CAP_NET_ADMIN and CAP_SETPCAP (in its
// own user namespace only). It brings loopback up and gives up every capability
// before anything else, then listens on SOCKET (in a memory volume of its own: a
// pathname socket, reachable from every network namespace) and takes exactly one
// connection: the first, from `internal attach` which cordon execs in the Pod before
// any command exists, and only from a process that entered the Pod from outside (its
// parent is outside the Pod's pid namespace, as an exec'd process's is and no
// command's can be). Then it closes and removes the socket, so no later process can
// connect, whatever it can read. The first message is its spec; when it asks for
// egress, it listens on the proxy address in its network namespace (before any
// command exists, as on every backend), and when it asks for gates, on the Pod's gate
// socket. It runs the self-check (loopback only included) and confines as on every
// backend, answers with the outcome, handing the listeners to the relay with it
// (internal/ctlmux relays each connection to cordon's egress proxy or gate service; no
// command ever holds a listener), and serves the session's
// commands on that connection until cordon hangs up. The commands it starts share its network namespace. It is their
// subreaper: orphans come back to it, not to process 1.
func podInnerMain(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintln(os.Stderr, "usage: cordon internal init --pod-inner /ABSOLUTE/SOCKET")
		return wire.ExitSelfCheck
	}
	if err := linux.SetDumpable(false); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return wire.ExitSelfCheck
	}
	if err := enterEmptyNetns(); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return wire.ExitSelfCheck
	}
	if err := linux.CloseOnExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return wire.ExitSelfCheck
	}
	pre, filter := startPrecheck(), startSeccomp()
	c, err := acceptAttach(args[0], PodAttachWait)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		if errors.Is(err, errStopped) {
			return 0
		}
		return wire.ExitSelfCheck
	}
	fmt.Fprintln(os.Stderr, "cordon: process 1: cordon attached")
	spec, err := recvSpec(c)
	var lns []*os.File // the egress and gate listeners, handed over with the status
	if err == nil && spec.Egress != "" {
		var ln *os.File
		ln, err = listenEgress(spec.Egress)
		lns = append(lns, ln)
	}
	if err == nil && spec.Gate != "" {
		var ln *os.File
		ln, err = listenGate(spec.Gate)
		lns = append(lns, ln)
	}
	var k *confiner
	if err == nil {
		k, err = checkAndConfine(&spec, pre, filter)
	}
	if err == nil {
		err = podFiles(spec)
	}
	st := ctl.Msg{Op: ctl.OpStatus}
	var files []*os.File
	if err != nil {
		st.Error = err.Error()
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
	} else {
		files = lns
	}
	serr := c.Send(st, files...)
	for _, ln := range lns {
		if ln != nil {
			ln.Close() // the relay holds them now: no command ever does
		}
	}
	if err != nil || serr != nil {
		if serr == nil {
			awaitHangup(c, refusalGrace)
		}
		c.Close()
		return wire.ExitSelfCheck
	}
	setEnv(spec.Env)
	return serve(c, k)
}

// refusalGrace bounds how long process 1 waits, after refusing its spec, for cordon
// to hang up.
const refusalGrace = 10 * time.Second

// awaitHangup waits until cordon hangs up c, at most wait. The relay (`internal
// attach`) runs in this container's pid namespace, which ends with process 1: were
// process 1 to exit at once after its refusal, the relay could be killed before it
// passed the refusal on, and cordon would read only the end of the stream.
func awaitHangup(c *ctl.Conn, wait time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, files, err := c.Recv()
			ctl.CloseFiles(files)
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
}

var errStopped = errors.New("stopped before cordon attached")

// acceptAttach listens on socket for `internal attach` and returns its connection,
// the only one it takes; the socket is gone when it returns. It gives up after wait,
// and at SIGTERM or SIGINT (the kubelet stopping a Pod nobody attached to).
func acceptAttach(socket string, wait time.Duration) (*ctl.Conn, error) {
	ln, err := ctl.Listen(socket)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()
	if err := os.Chmod(socket, 0o600); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	_ = ln.SetDeadline(time.Now().Add(wait))
	type accepted struct {
		uc  *net.UnixConn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		uc, err := ln.AcceptUnix()
		if err == nil {
			ln.Close() // before anything else: nobody connects after the first
			err = checkAttachPeer(uc)
			if err != nil {
				uc.Close()
			}
		}
		ch <- accepted{uc, err}
	}()
	fmt.Fprintf(os.Stderr, "cordon: process 1 waiting for cordon to attach on %s\n", socket)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, fmt.Errorf("waiting for cordon to attach: %w", a.err)
		}
		return ctl.New(a.uc), nil
	case <-stop:
		return nil, errStopped
	}
}

// checkAttachPeer fails unless the peer runs as this process's uid and entered the
// Pod from outside: its parent is outside this pid namespace (PPid 0), as an exec'd
// process's is. Every process the Pod's init starts, and their descendants (orphans are
// reparented to it, their subreaper), has its parent inside.
func checkAttachPeer(uc *net.UnixConn) error {
	uid, err := linux.PeerUID(uc)
	if err == nil && uid != os.Geteuid() {
		err = fmt.Errorf("the peer runs as uid %d", uid)
	}
	var pid int
	if err == nil {
		pid, err = linux.PeerPID(uc)
	}
	if err == nil && pid <= 1 {
		err = fmt.Errorf("the peer's pid is %d", pid)
	}
	var status []byte
	if err == nil {
		status, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	}
	if err == nil && !strings.Contains(string(status), "\nPPid:\t0\n") {
		err = errors.New("the peer was started inside the sandbox")
	}
	if err != nil {
		return fmt.Errorf("refusing the connection: %w", err)
	}
	return nil
}

// recvSpec reads the host's first message, the spec, and checks it is a Pod's.
func recvSpec(c *ctl.Conn) (wire.Spec, error) {
	m, files, err := c.Recv()
	ctl.CloseFiles(files)
	if err != nil {
		return wire.Spec{}, fmt.Errorf("reading the spec: %w", err)
	}
	if m.Op != ctl.OpSpec {
		return wire.Spec{}, fmt.Errorf("%q where the spec was due", m.Op)
	}
	var spec wire.Spec
	if err := json.Unmarshal(m.Spec, &spec); err != nil {
		return wire.Spec{}, fmt.Errorf("reading the spec: %w", err)
	}
	switch {
	case !spec.Serve || len(spec.Argv) > 0:
		err = errors.New("a Pod's process 1 serves a session: it runs no command of its own")
	case spec.Control != nil:
		err = errors.New("a Pod's process 1 dials no control socket: it was reached on its own")
	case spec.Egress != "" && spec.Egress != ctlmux.ProxyAddr:
		err = fmt.Errorf("a Pod's egress listener is on %s only, not %q", ctlmux.ProxyAddr, spec.Egress)
	case spec.Gate != "" && spec.Gate != ctlmux.GateSocket:
		err = fmt.Errorf("a Pod's gate listener is on %s only, not %q", ctlmux.GateSocket, spec.Gate)
	}
	return spec, err
}

// listenGate listens on the Pod's gate socket, path (in the Pod's gate volume, which
// commands may not write: they can connect to the socket, never remove or replace it),
// and returns the listener. The socket stays when the listener here is closed: the
// relay holds its copy.
func listenGate(path string) (*os.File, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("gate listener: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		return nil, fmt.Errorf("gate listener: %w", err)
	}
	return f, nil
}

// podFiles writes the spec's credential files before any command runs: only into
// the Pod's private memory volume for them, which no command can write.
func podFiles(spec wire.Spec) error {
	if len(spec.Files) == 0 {
		return nil
	}
	if spec.FilesDir != paths.SandboxSecrets {
		return fmt.Errorf("credential files go in %s, not %q", paths.SandboxSecrets, spec.FilesDir)
	}
	return writeFiles(spec.FilesDir, spec.Files)
}

// setEnv makes env the environment every command starts with.
func setEnv(env []string) {
	os.Clearenv()
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			os.Setenv(k, v)
		}
	}
}

// AttachMain is `internal attach SOCKET`, which cordon execs in a Pod through the API
// server: it connects to process 1's control socket and relays between it and its
// own stdin and stdout, the exec stream (internal/ctlmux). It is not dumpable, so no
// command (which shares its uid) can open its descriptors; commands are also kept
// off it by Landlock, which lets a confined process trace nothing outside its domain.
func AttachMain(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintln(os.Stderr, "usage: cordon internal attach /ABSOLUTE/SOCKET")
		return 2
	}
	if err := linux.SetDumpable(false); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal attach: %v\n", err)
		return 1
	}
	if err := linux.CloseOnExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal attach: %v\n", err)
		return 1
	}
	c, err := dialInit(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal attach: process 1's control socket: %v\n", err)
		return 1
	}
	if err := ctlmux.Pod(c, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal attach: %v\n", err)
		return 1
	}
	return 0
}
