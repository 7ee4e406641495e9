package bwrap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/handoff"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

func (b *Backend) bin() (string, error) {
	name := b.Path
	if name == "" {
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", errdefs.Unavailablef("bwrap: Bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap); cordon never runs a command unsandboxed")
	}
	return p, nil
}

// Check implements sandbox.Backend. It is cheap: it finds bwrap and checks that user
// namespaces can be created; a failure to build the sandbox is still reported by Start.
func (b *Backend) Check(ctx context.Context) error {
	if _, err := b.bin(); err != nil {
		return err
	}
	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(data)) == "0" {
		return errdefs.Unavailablef("bwrap: user namespaces are disabled (sysctl user.max_user_namespaces=0); enable them or use a container backend")
	}
	if data, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(data)) == "0" && os.Geteuid() != 0 {
		return errdefs.Unavailablef("bwrap: unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0)")
	}
	return nil
}

// CanStage implements sandbox.Backend.CanStage: a staged run's overlay is mounted by
// cordon, as root, in the private mount namespace bwrap starts from (package
// handoff); as another user there is no such namespace, and Debian's bwrap (0.8) has
// no --overlay.
func (b *Backend) CanStage() error {
	if os.Geteuid() != 0 {
		return errdefs.Unavailablef("bwrap: staged runs need cordon to run as root (it mounts the workspace's overlay in the sandbox's mount namespace); run without --stage or as root")
	}
	return nil
}

// prepareUpper gives the upper directory's root the workspace's mode and the sandbox
// uid: the overlay's root directory is it, and the sandbox writes there as that uid.
func prepareUpper(upper, workspace string, uid, gid int) error {
	fi, err := os.Stat(workspace)
	if err != nil {
		return errdefs.Unavailablef("%w", err)
	}
	if err := os.Chown(upper, uid, gid); err != nil {
		return errdefs.Unavailablef("preparing the staged workspace: %w", err)
	}
	if err := os.Chmod(upper, fi.Mode().Perm()); err != nil {
		return errdefs.Unavailablef("preparing the staged workspace: %w", err)
	}
	return nil
}

// Start implements sandbox.Backend: it creates the run's cgroup (with limits); each Exec
// starts one bwrap sandbox in it.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (_ sandbox.Sandbox, err error) {
	// What Warm began is this sandbox's from here, released by Close or on failure.
	s := &instance{plan: plan, host: host, userns: b.take(plan, nil)}
	if os.Geteuid() == 0 {
		// The first Exec's network namespace, made while the rest of the start goes on
		// (see handoff.Spec.Netns).
		s.netns = handoff.PrepareNetns()
	}
	defer func() {
		if err != nil {
			s.userns.Close()
			s.netns.Close()
		}
	}()
	if s.bin, err = b.bin(); err != nil {
		return nil, err
	}
	if s.uid, s.gid, err = sandboxIDs(plan, host.UID); err != nil {
		return nil, err
	}
	if host.Stage != nil {
		if err := b.CanStage(); err != nil {
			return nil, err
		}
		if err := prepareUpper(host.Stage.Upper, plan.Workspace, s.uid, s.gid); err != nil {
			return nil, err
		}
	}
	lim := linux.Limits{Memory: plan.Limits.Memory, Pids: plan.Limits.Pids, CPU: plan.Limits.CPU}
	cg, err := linux.NewCgroup(host.RunID, lim)
	switch {
	case err == nil:
		s.cg = cg
		if o := s.owner(); o != -1 {
			if err := cg.Delegate(o); err != nil {
				cg.Remove()
				return nil, errdefs.Unavailablef("%w", err)
			}
		}
	case plan.Limits.Asked():
		return nil, errdefs.Unavailablef("limits need a cgroup cordon can write (run as root or delegate a cgroup): %w", err)
	case plan.Limits.Any():
		// Only the defaults: the run goes on, and says at its first command that
		// nothing but the tmpfs sizes bounds it.
		s.unbounded = fmt.Sprintf("cordon: warning: the default limits (%s) are not enforced: %v (run as root or delegate a cgroup)\n",
			strings.Join(plan.Limits.Defaulted, ", "), err)
	}
	return s, nil
}

// instance is one run's bwrap sandboxes. Exec may be called from several goroutines
// (sessions): each call is its own bwrap in the run's cgroup. The cgroup-wide kill that
// takes what a command left behind is done only when no other Exec is running (mu and
// active); otherwise only that Exec's bwrap is killed, and --die-with-parent with the
// pid namespace takes everything it started.
type instance struct {
	bin  string
	plan *contract.Plan
	host sandbox.Host
	cg   *linux.Cgroup // nil when no writable cgroup exists and no limits are set
	// uid and gid are the sandbox's host ids (never 0 when cordon is root).
	uid, gid int

	mu     sync.Mutex // mu guards active and serialises cgroup-wide kills with starts.
	active int        // Execs between start and return

	liveMu sync.Mutex // liveMu guards live.
	live   *os.File   // a staged session's overlay, mounted for its process 1; nil otherwise

	userns *handoff.Userns // the idmap namespace Backend.Warm began for root's files, or nil

	netMu sync.Mutex     // netMu guards netns.
	netns *handoff.Netns // the network namespace Start began for the first Exec as root; nil once taken

	// unbounded is the warning the first Exec prints when the default limits could not
	// be enforced (no writable cgroup); warned makes it once.
	unbounded string
	warned    sync.Once

	closeOnce sync.Once
	closeErr  error
}

// Exec implements sandbox.Sandbox.
func (s *instance) Exec(ctx context.Context, p sandbox.Process) (int, error) {
	var ph trace.Seq
	defer ph.End()
	ph.Next("bwrap.prepare")
	f, err := s.openFDs()
	if err != nil {
		return 0, err
	}
	defer f.close()
	args, sp, err := s.bwrapArgs(f)
	if err != nil {
		return 0, err
	}
	if sp != nil {
		defer sp.Netns.Close() // the sandbox keeps its network namespace
	}
	extra := f.child
	statusR, specW, infoR := f.statusR, f.specW, f.infoR
	if len(p.Argv) == 0 && !p.Serve {
		return 0, errdefs.Invalidf("empty command")
	}
	cmd, bwrapErr, out, err := s.command(args, extra, p)
	if err != nil {
		return 0, err
	}
	defer out.drain(0) // bwrap did not start: no one writes
	if s.unbounded != "" && p.Stderr != nil {
		s.warned.Do(func() { _, _ = io.WriteString(p.Stderr, s.unbounded) })
	}
	defer s.enter()()
	ph.Next("bwrap.spawn")
	spawned := time.Now()
	release := func() {}
	if sp != nil {
		release, err = s.startHandedOver(sp, cmd, p.Serve)
	} else {
		err = cmd.Start()
	}
	f.closeChild()
	out.closeChild()
	if err != nil {
		return 0, errdefs.Unavailablef("starting bwrap: %w", err)
	}
	waitErr := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		release() // bwrap's parent thread, when handed over: only now may it end
		waitErr <- err
	}()

	ph.Next("bwrap.let_run") // waits for a one-command run's early setup
	if err := s.letRun(ctx, infoR, specW, cmd.Process.Pid, p); err != nil {
		if errors.Is(err, errNoChild) {
			// bwrap ended before it had a child: its own words say why.
			return s.finish(p.Stderr, ended(waitErr, out), wire.Status{}, false, bwrapErr)
		}
		s.abort(cmd, waitErr, out)
		return 0, err
	}
	ph.Next("sandbox.status") // process 1's self-check, then the command's run
	st, checked := readStatus(statusR)
	traceInit(spawned, st.Times)
	ph.Next("bwrap.wait")
	select {
	case err := <-waitErr:
		out.drain(-1) // bwrap ended on its own, and its pid namespace with it
		return s.finish(p.Stderr, err, st, checked, bwrapErr)
	case <-ctx.Done():
		s.abort(cmd, waitErr, out)
		return 0, ctx.Err()
	}
}

// bwrapArgs is bwrap's command line for the sandbox whose descriptors f holds; as
// root, sp is the hand-over that starts it (never host root inside: bwrap runs as the
// sandbox uid, on handed-over sources) and args those of the handed-over bwrap.
func (s *instance) bwrapArgs(f *fds) (args []string, sp *handoff.Spec, err error) {
	root := os.Geteuid() == 0
	args = Args(s.plan, s.host, root) // the sysctls' procfs is the hand-off's
	if f.infoR != nil {
		args = append([]string{"--info-fd", strconv.Itoa(3 + len(f.child) - 1)}, args...)
	}
	if !root {
		return args, nil, nil
	}
	spec, handed, err := handedOver(args, s.host, s.plan.Workspace, s.uid, s.gid)
	if err != nil {
		return nil, nil, err
	}
	spec.Prepared = []*handoff.Userns{s.userns}
	if ns := s.takeNetns(); ns != nil {
		// bwrap starts in it (the hand-off joins it) instead of making one.
		spec.Netns = ns
		handed = slices.DeleteFunc(handed, func(a string) bool { return a == "--unshare-net" })
	}
	if s.cg != nil && s.cg.NeedsV1() {
		// bwrap starts in the v1 limit cgroups: its forking thread joins them for
		// the fork, which waits for nothing (release then only checks).
		spec.JoinCgroups = s.cg.JoinV1
	}
	return handed, &spec, nil
}

// takeNetns returns the network namespace Start began, once: a namespace is one
// sandbox's, and a session's next Exec has bwrap make its own.
func (s *instance) takeNetns() *handoff.Netns {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	ns := s.netns
	s.netns = nil
	return ns
}

// enter counts an Exec as active until the function it returns is called.
func (s *instance) enter() (leave func()) {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}
}

// command is bwrap with args, extra as its descriptors from 3, in the run's cgroup;
// its stderr is p's, the first 4 KiB of it kept for the reason bwrap failed. Its
// output goes through out's pipes, not os/exec's (see outputs).
func (s *instance) command(args []string, extra []*os.File, p sandbox.Process) (_ *exec.Cmd, _ *bytes.Buffer, out *outputs, err error) {
	cmd := exec.Command(s.bin, args...)
	cmd.Env = s.host.Env
	if cmd.Env == nil {
		cmd.Env = s.plan.Environ()
	}
	var bwrapErr bytes.Buffer
	stderr := p.Stderr
	if stderr != nil {
		stderr = io.MultiWriter(p.Stderr, &limitedBuffer{buf: &bwrapErr, max: 4096})
	}
	out = &outputs{}
	cmd.Stdin = p.Stdin
	if cmd.Stdout, err = out.add(p.Stdout); err == nil {
		cmd.Stderr, err = out.add(stderr)
	}
	if err != nil {
		out.closeChild()
		out.drain(0)
		return nil, nil, nil, errdefs.Unavailablef("starting bwrap: %w", err)
	}
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.cg != nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, s.cg.FD()
	}
	return cmd, &bwrapErr, out, nil
}

// letRun lets process 1 run the command: once p.Ready (when set) has returned nil it
// sends the spec (see release). bwrap builds the sandbox and process 1 checks it
// meanwhile; process 1 runs nothing before it has its spec.
func (s *instance) letRun(ctx context.Context, infoR, specW *os.File, bwrapPID int, p sandbox.Process) error {
	if p.Ready != nil {
		sp := trace.Begin("bwrap.ready")
		err := p.Ready(ctx)
		sp.End()
		if err != nil {
			return err
		}
	}
	return s.release(infoR, specW, bwrapPID, p)
}

// fds are the pipes Exec passes to bwrap beyond stdio: fd 3 pid1's status, fd 4 its
// spec, then one per credential file (SecretFD), then bwrap's info (only when v1
// limit cgroups must be joined).
type fds struct {
	statusR, specW, infoR *os.File
	child                 []*os.File // the child's ends, in fd order from 3
}

func (s *instance) openFDs() (*fds, error) {
	f := &fds{}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			f.close()
			f.closeChild()
		}
		return r, w, err
	}
	var w, r *os.File
	var err error
	if f.statusR, w, err = pipe(); err != nil {
		return nil, err
	}
	f.child = append(f.child, w)
	if r, f.specW, err = pipe(); err != nil {
		return nil, err
	}
	f.child = append(f.child, r)
	for _, sf := range s.host.SecretFiles {
		if r, w, err = pipe(); err != nil {
			return nil, err
		}
		f.child = append(f.child, r)
		// bwrap copies it into a file on the sandbox's own tmpfs: the value never
		// touches a disk. A pipe holds 64 KiB; write from a goroutine regardless.
		go func(w *os.File, v string) {
			_, _ = w.WriteString(v)
			w.Close()
		}(w, sf.Value.Reveal())
	}
	if s.cg != nil && s.cg.NeedsV1() {
		if f.infoR, w, err = pipe(); err != nil {
			return nil, err
		}
		f.child = append(f.child, w)
	}
	return f, nil
}

// closeChild closes the child's ends in the parent (bwrap has its own copies).
func (f *fds) closeChild() {
	for _, c := range f.child {
		c.Close()
	}
	f.child = nil
}

func (f *fds) close() {
	for _, c := range []*os.File{f.statusR, f.specW, f.infoR} {
		if c != nil {
			c.Close()
		}
	}
}

// errNoChild is release's answer when bwrap closed its info pipe without naming a
// child: it failed before building the sandbox.
var errNoChild = errors.New("bwrap ended before it reported its child")

// release moves the sandbox into v1 limit cgroups when needed (bwrap and its child,
// each one not there already: as root they start there, see JoinCgroups) and then
// sends pid1 its spec, which lets it proceed.
func (s *instance) release(infoR, specW *os.File, bwrapPID int, p sandbox.Process) error {
	if infoR != nil {
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		sp := trace.Begin("bwrap.info")
		err := json.NewDecoder(infoR).Decode(&info)
		sp.End()
		if err != nil || info.ChildPID == 0 {
			if errors.Is(err, io.EOF) {
				return errNoChild
			}
			if err == nil {
				err = errors.New("no child-pid")
			}
			return errdefs.Unavailablef("bwrap did not report its child (%w)", err)
		}
		sp = trace.Begin("cgroup.v1")
		err = s.cg.AddV1(bwrapPID, info.ChildPID)
		sp.End()
		if err != nil {
			return errdefs.Unavailablef("applying limits: %w", err)
		}
	}
	dir := p.Dir
	if dir == "" {
		dir = s.plan.Workdir
	}
	sp := wire.Spec{Argv: p.Argv, Dir: dir, Writable: s.plan.Writable(), Read: s.plan.Readable(), Write: s.plan.Writable(), HostUID: s.uid}
	if s.host.ControlSocket != "" {
		// Process 1 hands the egress listener over on it (and, in a session, takes
		// commands there).
		sp.Control = &wire.Control{Socket: sandbox.ControlPath, Token: s.host.ControlToken}
		sp.Egress = sandbox.ProxyAddr
		sp.Barrier = p.Barrier && !p.Serve
	}
	sp.Serve = p.Serve
	sp.Trace = trace.Enabled()
	spec, _ := json.Marshal(sp)
	_, err := specW.Write(spec)
	specW.Close()
	if err != nil && !errors.Is(err, syscall.EPIPE) {
		return errdefs.Unavailablef("sending the command to the sandbox: %w", err)
	}
	return nil
}

// traceInit records process 1's start-up, which it reported in its Status (it cannot
// reach the trace file): init.started from bwrap's spawn to cordon-init's Go code
// running (bwrap's namespace and mount work, the exec, the Go runtime's start), then
// waiting for the spec, the self-check and confinement, the hand-over.
func traceInit(spawned time.Time, t *wire.Times) {
	if t == nil || !trace.Enabled() {
		return
	}
	at := func(ns int64) time.Time { return time.Unix(0, ns) }
	trace.Add("init.started", spawned, at(t.Main))
	trace.Add("init.spec_wait", at(t.Main), at(t.Spec))
	trace.Add("init.check", at(t.Spec), at(t.Checked))
	if t.Dialed != 0 {
		trace.Add("init.handover", at(t.Checked), at(t.Dialed))
	}
}

// readStatus reads pid1's self-check report; checked is false when pid1 never got that
// far (bwrap failed to build the sandbox).
func readStatus(r io.Reader) (wire.Status, bool) {
	var st wire.Status
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &st) != nil {
		return st, false
	}
	return st, true
}

func (s *instance) finish(stderr io.Writer, err error, st wire.Status, checked bool, bwrapErr *bytes.Buffer) (int, error) {
	if !checked {
		msg := strings.TrimSpace(bwrapErr.String())
		if msg == "" && err != nil {
			msg = err.Error()
		}
		return 0, errdefs.Unavailablef("bwrap could not build the sandbox: %s%s", msg, hint(msg))
	}
	if !st.OK {
		return 0, fmt.Errorf("%w: its self-check: %s", errdefs.ErrSandbox, st.Error)
	}
	if s.cg != nil {
		// Anything the command left behind (daemonised children) dies with the run.
		s.killCgroupIfAlone()
		if s.plan.Limits.Memory > 0 && s.cg.OOMKilled() && stderr != nil {
			fmt.Fprintf(stderr, "cordon: the memory limit (limits.memory: %d bytes) killed a process of the command\n", s.plan.Limits.Memory)
		}
	}
	if code, ok := errdefs.ProcessCode(err); ok {
		return code, nil
	}
	return 0, fmt.Errorf("waiting for bwrap: %w", err)
}

func hint(msg string) string {
	switch {
	case strings.Contains(msg, "uid map"), strings.Contains(msg, "user namespace"), strings.Contains(msg, "Operation not permitted"):
		return " (user namespaces may be restricted: check sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces and AppArmor's userns restriction)"
	}
	return ""
}

// kill stops the sandbox and everything in it, including children that escaped with
// setsid: the cgroup kill reaches every process; killing bwrap's child, process 1
// of the sandbox's pid namespace, makes the kernel kill every other member. The child
// is killed itself, not through bwrap's death: bwrap's child sets its parent-death
// signal only once it has built the sandbox, and one that outlives bwrap earlier goes
// on building it and running process 1, which waits for its spec, holding the
// command's output open (and, with other Execs in the cgroup, no cgroup kill comes).
func (s *instance) kill(cmd *exec.Cmd) {
	s.killCgroupIfAlone()
	_ = linux.KillLauncher(cmd.Process, time.Second)
}

// ended waits for bwrap's own end, then for the last of its output: bwrap ends by
// itself once its child, process 1, has, and the pid namespace with it.
func ended(waitErr <-chan error, out *outputs) error {
	err := <-waitErr
	out.drain(-1)
	return err
}

// abort kills the sandbox and waits for bwrap's end and, at most drainAfterKill,
// for the last of the sandbox's output.
func (s *instance) abort(cmd *exec.Cmd, waitErr <-chan error, out *outputs) {
	s.kill(cmd)
	<-waitErr
	out.drain(drainAfterKill)
}

// killCgroupIfAlone kills every member of the run's cgroup when the calling Exec is the
// only one running; with others running it does nothing, since the cgroup is theirs too.
func (s *instance) killCgroupIfAlone() {
	if s.cg == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active <= 1 {
		// A session's next Exec clones bwrap into this cgroup again: Kill leaves it
		// usable for that.
		_ = s.cg.Kill(5 * time.Second)
	}
}

// StartsEarly implements sandbox.Sandbox.StartsEarly: Exec starts bwrap at once and sends
// process 1 its spec (which lets it proceed) only once Process.Ready has returned.
func (s *instance) StartsEarly() bool { return true }

// Barrier implements sandbox.Barrier: process 1 hands its barrier's listener over on
// the control socket, which a one-command run has whenever it has a network namespace.
func (s *instance) Barrier() bool { return s.host.ControlSocket != "" }

// CgroupID implements sandbox.Sandbox.CgroupID: the run's cgroup v2 id, for the
// syscall monitor (0 without a cgroup).
func (s *instance) CgroupID() (uint64, error) {
	if s.cg == nil {
		return 0, nil
	}
	return s.cg.ID, nil
}

// SpillShown implements sandbox.Sandbox.SpillShown: bwrap mounts a session's spill
// directory at sandbox.SpillPath.
func (s *instance) SpillShown() string { return sandbox.SpillPath }

// Close implements sandbox.Sandbox.
func (s *instance) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.cg != nil {
			s.closeErr = s.cg.Remove()
		}
		s.dropLive()
		s.userns.Close()
		s.takeNetns().Close()
	})
	return s.closeErr
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) < room {
			room = len(p)
		}
		l.buf.Write(p[:room])
	}
	return len(p), nil
}

// owner is the uid process 1 runs as when it is not cordon's own, for the cgroups it
// clones commands into; -1 otherwise.
func (s *instance) owner() int {
	if s.uid == os.Geteuid() {
		return -1
	}
	return s.uid
}

// CommandCgroup implements sandbox.Sandbox.CommandCgroup: a cgroup below the run's, which
// process 1 clones each command into.
func (s *instance) CommandCgroup(name string) (*sandbox.CommandCgroup, error) {
	if s.cg == nil {
		return nil, nil
	}
	return sandbox.NewCommandCgroup(s.cg, name, s.owner())
}

// SyncWorkspace implements sandbox.Sandbox.SyncWorkspace: nothing to bring back,
// bwrap binds the host's workspace.
func (s *instance) SyncWorkspace(context.Context, bool) error { return nil }
