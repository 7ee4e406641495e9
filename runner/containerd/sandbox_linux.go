package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd"
	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/defaults"
	cerrdefs "github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/snapshots"
	"github.com/containerd/typeurl/v2"
	"github.com/distribution/reference"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/container"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// Explain says, for `cordon explain`, how the containerd backend builds the sandbox from
// plan.
func (b *Backend) Explain(plan *contract.Plan) string {
	return container.Explain("containerd", "an empty network namespace", plan)
}

// Start implements sandbox.Backend: it creates the run's container (its snapshot
// comes from the image, or its root is the host view's skeleton). Each Exec runs one
// task in it. What runs whose cordon is gone left behind is removed in the
// background.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	cli, err := b.client()
	if err != nil {
		return nil, err
	}
	ctx = b.ctx(ctx)
	s := &instance{cli: cli, ns: b.namespace(), gcDone: make(chan struct{})}
	go func() {
		defer close(s.gcDone)
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gcTimeout)
		defer cancel()
		_, _ = gc(gctx, cli)
	}()
	if err := s.create(ctx, plan, host); err != nil {
		<-s.gcDone
		return nil, errors.Join(err, s.unmount()) // no container uses them
	}
	return s, nil
}

func (s *instance) create(ctx context.Context, plan *contract.Plan, host sandbox.Host) error {
	in := container.Input{Plan: plan, Host: host, Image: plan.Image != ""}
	if err := container.HostIDs(&in); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	if err := container.PrepareInit(&in); err != nil {
		return errdefs.Unavailablef("containerd: %w", err)
	}
	if host.Stage != nil {
		unstage, err := container.MountStage(&in)
		if err != nil {
			return errdefs.Unavailablef("containerd: staging the workspace: %w", err)
		}
		s.unmounts = append(s.unmounts, unstage)
	}
	unmap, err := container.MountIdmapped(&in)
	if err != nil {
		return errdefs.Unavailablef("containerd: idmapping the writable paths for the sandbox uid: %w", err)
	}
	s.unmounts = append(s.unmounts, unmap)
	name := container.Name(host.RunID)
	labels := container.Labels(in, container.Owner())
	var opts []containerd.NewContainerOpts
	rootfs := ""
	if in.Image {
		img, err := image(ctx, s.cli, plan.Image, plan.Pull)
		if err != nil {
			return err
		}
		snap := containerd.WithNewSnapshot(name, img, snapshots.WithLabels(labels))
		opts = append(opts, containerd.WithSnapshotter(containerd.DefaultSnapshotter), unpacking(img, snap))
	} else {
		rootfs = filepath.Join(host.RunDir, "rootfs")
		if err := container.MakeSkeleton(rootfs, in); err != nil {
			return errdefs.Unavailablef("containerd: the host view's root: %w", err)
		}
	}
	opts = append(opts, containerd.WithContainerLabels(labels), containerd.WithNewSpec(specOpts(in, rootfs)...))
	c, err := s.cli.NewContainer(ctx, name, opts...)
	if err != nil {
		if in.Image { // the snapshot may exist without its container
			_ = s.cli.SnapshotService(containerd.DefaultSnapshotter).Remove(context.WithoutCancel(ctx), name)
		}
		return errdefs.Unavailablef("containerd: creating the container: %w", err)
	}
	s.c, s.in = c, in
	s.writable = container.Writable(in)
	if plan.Monitor.Mode != contract.MonitorOff {
		// The monitor watches the task's cgroup (the default spec's /NAMESPACE/ID):
		// make it now, to know its id.
		if id, dir, err := container.PrecreateCgroup(filepath.Join(s.ns, name)); err == nil {
			s.cgID, s.cgDir = id, dir
		}
	}
	return nil
}

// CommandCgroup implements sandbox.Sandbox.CommandCgroup: below the task's cgroup (the
// default spec's /NAMESPACE/ID).
func (s *instance) CommandCgroup(name string) (*sandbox.CommandCgroup, error) {
	dir := s.cgDir
	if dir == "" {
		dir = container.CgroupDir(filepath.Join(s.ns, container.Name(s.in.Host.RunID)))
	}
	return container.CommandCgroup(dir, s.in.UID, name)
}

// CgroupID implements sandbox.Sandbox.CgroupID: the cgroup v2 id of the container's
// tasks, for the monitor; 0 when the monitor was not asked for.
func (s *instance) CgroupID() (uint64, error) { return s.cgID, nil }

// StartsEarly implements sandbox.Sandbox.StartsEarly: a task is created and started
// whole, so Exec never calls Process.Ready.
func (s *instance) StartsEarly() bool { return false }

// SpillShown implements sandbox.Sandbox.SpillShown: the container has a session's
// spill directory mounted at sandbox.SpillPath.
func (s *instance) SpillShown() string { return sandbox.SpillPath }

// image returns the contract's image, pulling it only when the contract says
// `pull: missing`, and unpacking it when needed.
func image(ctx context.Context, cli *containerd.Client, ref, pull string) (containerd.Image, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return nil, errdefs.Invalidf("containerd: image %q: %w", ref, err)
	}
	full := named.String()
	img, err := cli.GetImage(ctx, full)
	switch {
	case err == nil:
	case !cerrdefs.IsNotFound(err):
		return nil, errdefs.Unavailablef("containerd: looking up image %q: %w", ref, err)
	case pull != "missing":
		return nil, errdefs.Unavailablef("containerd: image %q (%s) is not present in namespace %q and the contract does not allow pulling (pull: never); import it (ctr -n %[3]s images import/pull) or set pull: missing", ref, full, DefaultNamespace)
	default:
		if img, err = cli.Pull(ctx, full, containerd.WithPullUnpack); err != nil {
			return nil, errdefs.Unavailablef("containerd: pulling image %q (pull: missing): %w", ref, err)
		}
	}
	return img, nil
}

// unpacking prepares the snapshot, unpacking the image first only when its layers
// are not there yet (asking every time would cost several calls on every run).
func unpacking(img containerd.Image, snap containerd.NewContainerOpts) containerd.NewContainerOpts {
	return func(ctx context.Context, cli *containerd.Client, c *containers.Container) error {
		err := snap(ctx, cli, c)
		if !cerrdefs.IsNotFound(err) {
			return err
		}
		if err := img.Unpack(ctx, containerd.DefaultSnapshotter); err != nil {
			return fmt.Errorf("unpacking image %q: %w", img.Name(), err)
		}
		return snap(ctx, cli, c)
	}
}

// instance is one run's container. Exec may be called once at a time; Close may be
// called while it runs, and then kills its task.
type instance struct {
	// unmounts detach, in reverse, what cordon mounted on the host for the engine to
	// bind (a staged run's overlay, idmapped sources), each registered as it is made.
	unmounts []func() error
	cli      *containerd.Client
	ns       string // the containerd namespace
	c        containerd.Container
	in       container.Input
	writable []string
	gcDone   chan struct{} // closed when the background gc is over
	cgID     uint64        // the tasks' cgroup v2 id, when the monitor asked for it
	cgDir    string        // the cgroup directory cordon made for it, or ""

	// mu guards task and deleted: Close may run while an Exec does (a session's
	// process 1 that does not end when the host hangs up).
	mu      sync.Mutex
	task    containerd.Task // the running Exec's task, or nil
	deleted chan struct{}   // closed when the last Exec's task is deleted; nil before

	closeOnce sync.Once
	closeErr  error
}

// Deadlines of engine calls: no call cordon makes, in teardown above all, waits for a
// containerd that does not answer for longer.
const (
	killTimeout   = 5 * time.Second  // killing a task and seeing it exit
	removeTimeout = 10 * time.Second // deleting a task, or a container and its snapshot
	gcTimeout     = 30 * time.Second // a whole gc pass
)

// Exec implements sandbox.Sandbox: it runs one task.
func (s *instance) Exec(ctx context.Context, p sandbox.Process) (int, error) {
	if len(p.Argv) == 0 && !p.Serve {
		return 0, errdefs.Invalidf("empty command")
	}
	ctx = namespaces.WithNamespace(ctx, s.ns)
	s.waitDeleted(ctx)
	h, err := container.Hand("containerd", s.in, p, s.writable)
	if err != nil {
		return 0, err
	}
	defer h.Close() // pid1 kills the container when the status closes early (cordon killed)
	status := h.Status
	bg := context.WithoutCancel(ctx)
	var ooms *oomWatch
	if s.in.Plan.Limits.Memory > 0 {
		ooms = watchOOM(bg, s.cli, s.c.ID())
		defer ooms.stop()
	}
	var stdin io.Reader
	eof := &stdinEOF{r: p.Stdin}
	if p.Stdin != nil {
		stdin = eof
	}
	task, err := s.c.NewTask(ctx, cio.NewCreator(cio.WithStreams(stdin, p.Stdout, p.Stderr)))
	if err != nil {
		return 0, errdefs.Unavailablef("containerd: creating the task: %w", err)
	}
	eof.then(func() {
		cctx, cancel := context.WithTimeout(bg, killTimeout)
		defer cancel()
		_ = task.CloseIO(cctx, containerd.WithStdinCloser)
	})
	// The task goes when Exec returns, in the background: its processes are gone by
	// then (the pid namespace ended with pid1), and the shim's teardown overlaps what
	// the runner does next. Close and the next Exec wait for it.
	deleted := make(chan struct{})
	s.mu.Lock()
	s.task, s.deleted = task, deleted
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.task = nil
		s.mu.Unlock()
		go func() {
			defer close(deleted)
			dctx, cancel := context.WithTimeout(bg, removeTimeout)
			defer cancel()
			// The task has exited (or was killed and waited for): a plain delete,
			// with a kill only if it somehow still runs.
			if _, err := task.Delete(dctx); err != nil && !cerrdefs.IsNotFound(err) {
				_, _ = task.Delete(dctx, containerd.WithProcessKill)
			}
		}()
	}()
	exitC, err := task.Wait(bg)
	if err != nil {
		return 0, errdefs.Unavailablef("containerd: waiting for the task: %w", err)
	}
	if err := task.Start(ctx); err != nil {
		return 0, errdefs.Unavailablef("containerd: starting the task: %w", err) // a deadline met here is the command's timeout
	}
	stC := make(chan statusResult, 1)
	go func() {
		st, ok := wire.ReadStatus(status)
		stC <- statusResult{st, ok}
	}()
	code, err := waitTask(ctx, task, exitC)
	if err != nil {
		return 0, err
	}
	return s.finish(task, code, status, stC, ooms, p)
}

// waitTask waits for the task's exit status; when ctx ends first it kills the task,
// everything in it, waits a bounded time for it to go and returns ctx's error.
func waitTask(ctx context.Context, task containerd.Task, exitC <-chan containerd.ExitStatus) (int, error) {
	select {
	case es := <-exitC:
		c, _, err := es.Result()
		if err != nil {
			return 0, errdefs.Unavailablef("containerd: waiting for the task: %w", err)
		}
		return int(c), nil
	case <-ctx.Done():
		killTask(context.WithoutCancel(ctx), task, exitC)
		return 0, ctx.Err()
	}
}

// killTask kills everything in task with SIGKILL, which ends even a stopped or traced
// process, and waits a bounded time for its exit (exitC, or nil to ask the task).
func killTask(ctx context.Context, task containerd.Task, exitC <-chan containerd.ExitStatus) {
	kctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	if exitC == nil {
		var err error
		if exitC, err = task.Wait(kctx); err != nil {
			return
		}
	}
	if task.Kill(kctx, syscall.SIGKILL, containerd.WithKillAll) == nil {
		select {
		case <-exitC:
		case <-kctx.Done():
		}
	}
}

// finish delivers the task's last output and turns pid1's status report and the exit
// code into Exec's result.
func (s *instance) finish(task containerd.Task, code int, status *os.File, stC <-chan statusResult, ooms *oomWatch, p sandbox.Process) (int, error) {
	// Every byte of output is delivered before Exec returns.
	task.IO().Wait()
	// The status line, if pid1 wrote one, is in the pipe by now.
	_ = status.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	st := <-stC
	switch {
	case !st.ok:
		return 0, errdefs.Unavailablef("containerd: the task exited (status %d) before cordon's process 1 reported", code)
	case !st.status.OK:
		return 0, fmt.Errorf("%w: its self-check: %s", errdefs.ErrSandbox, st.status.Error)
	}
	if ooms != nil && code != 0 && ooms.seen(code) && p.Stderr != nil {
		fmt.Fprintf(p.Stderr, "cordon: the memory limit (limits.memory: %d bytes) killed a process of the command\n", s.in.Plan.Limits.Memory)
	}
	return code, nil
}

// stdinEOF passes the command's stdin on and, at its end, closes the task's stdin:
// closing containerd's FIFO alone does not give the command end of file.
type stdinEOF struct {
	r      io.Reader
	mu     sync.Mutex // guards the fields below
	done   bool       // r reached its end
	closer func()
}

func (s *stdinEOF) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.mu.Lock()
		s.done = true
		c := s.closer
		s.mu.Unlock()
		if c != nil {
			c()
		}
	}
	return n, err
}

// then sets what to call at the end of stdin, calling it now if the end was reached.
func (s *stdinEOF) then(c func()) {
	s.mu.Lock()
	s.closer = c
	done := s.done
	s.mu.Unlock()
	if done {
		c()
	}
}

type statusResult struct {
	status wire.Status
	ok     bool
}

// oomWatch records OOM events of one container.
type oomWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex // guards hit
	hit    bool
}

func watchOOM(ctx context.Context, cli *containerd.Client, id string) *oomWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &oomWatch{cancel: cancel, done: make(chan struct{})}
	envs, errs := cli.Subscribe(ctx, `topic=="/tasks/oom"`)
	go func() {
		defer close(w.done)
		for {
			select {
			case env := <-envs:
				if env == nil {
					return
				}
				ev, err := typeurl.UnmarshalAny(env.Event)
				if oom, ok := ev.(*apievents.TaskOOM); err == nil && ok && oom.ContainerID == id {
					w.mu.Lock()
					w.hit = true
					w.mu.Unlock()
				}
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return w
}

// seen reports an OOM kill, waiting for its event to arrive, which may come after the
// task's exit: for up to two seconds after a status of 137 (SIGKILL, what the OOM
// killer sends), briefly after any other.
func (w *oomWatch) seen(code int) bool {
	wait := 300 * time.Millisecond
	if code == 128+9 {
		wait = 2 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		hit := w.hit
		w.mu.Unlock()
		if hit || time.Now().After(deadline) {
			return hit
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *oomWatch) stop() { w.cancel(); <-w.done }

// waitDeleted waits until the last Exec's task is deleted.
func (s *instance) waitDeleted(ctx context.Context) {
	s.mu.Lock()
	deleted := s.deleted
	s.mu.Unlock()
	if deleted == nil {
		return
	}
	select {
	case <-deleted:
	case <-ctx.Done():
	}
}

// HostUID implements sandbox.Backend.HostUID: a root-owned workspace (or other writable
// source) gets a host uid of the run's own, as bwrap's does.
func (b *Backend) HostUID(plan *contract.Plan) (int, bool, error) { return container.HostUID(plan) }

// CanStage implements sandbox.Backend.CanStage: cordon mounts the staged overlay on the
// host for containerd to bind, which takes root.
func (b *Backend) CanStage() error { return container.CanStage("containerd") }

// Close implements sandbox.Sandbox: it removes the container and its snapshot, and any
// task left. A task an Exec still waits for (a session's process 1 that did not end
// when the host hung up: stopped, traced or hung) is killed first. Every engine call
// it makes has a deadline, whatever ctx's.
func (s *instance) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		// One budget for all of it: a containerd that does not answer costs
		// removeTimeout, not the sum of every call's deadline.
		ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.WithoutCancel(ctx), s.ns), removeTimeout)
		defer cancel()
		s.mu.Lock()
		task := s.task
		s.mu.Unlock()
		// Kill the task an Exec still waits for, and wait for the Exec's own deletion,
		// which the kill sets going; then remove whatever is left.
		kctx, kcancel := context.WithTimeout(ctx, killTimeout)
		if task != nil {
			killTask(kctx, task, nil)
		}
		s.waitDeleted(kctx)
		kcancel()
		if err := removeContainer(ctx, s.c); err != nil {
			s.closeErr = fmt.Errorf("%w (cordon gc removes it later)", err)
		}
		container.RemoveCgroup(s.cgDir)
		s.closeErr = errors.Join(s.closeErr, s.unmount())
		select {
		case <-s.gcDone:
		case <-ctx.Done():
		}
	})
	return s.closeErr
}

// removeContainer deletes c and its snapshot, and first c's task if it has one. The
// task's deletion may fail and the task still go: its shim exits once the task is
// killed, and containerd 1.6 can answer the deletion with the shim's connection
// closed ("ttrpc: closed"). So the container is deleted whatever the task's deletion
// said, and the two are tried again (three times in all, a second apart at most)
// while containerd refuses the container for a task it still holds.
func removeContainer(ctx context.Context, c containerd.Container) error {
	err := c.Delete(ctx, containerd.WithSnapshotCleanup)
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	for try, wait := 0, 250*time.Millisecond; ; try, wait = try+1, 2*wait {
		var taskErr error
		if t, err := c.Task(ctx, reclaimFIFOs); err == nil {
			if _, err := t.Delete(ctx, containerd.WithProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
				taskErr = fmt.Errorf("containerd: deleting the task of %s: %w", c.ID(), err)
			}
		}
		err := c.Delete(ctx, containerd.WithSnapshotCleanup)
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		err = errors.Join(taskErr, fmt.Errorf("containerd: deleting container %s: %w", c.ID(), err))
		if try == 2 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// reclaimFIFOs attaches to a task left by a cordon that died, so that deleting the
// task also removes its stdio FIFOs (the client that made them never could).
func reclaimFIFOs(f *cio.FIFOSet) (cio.IO, error) {
	dir := ""
	for _, p := range []string{f.Stdin, f.Stdout, f.Stderr} {
		if p != "" {
			dir = filepath.Dir(p)
			break
		}
	}
	closer := func() error { return nil }
	if dir != "" && filepath.Dir(dir) == defaults.DefaultFIFODir {
		closer = func() error { return os.RemoveAll(dir) }
	}
	return cio.Load(cio.NewFIFOSet(f.Config, closer))
}

// GC removes the containers, tasks and snapshots of runs whose cordon process is
// gone (killed with -9) and returns their run ids. A containerd that does not answer
// has nothing to collect.
func (b *Backend) GC(ctx context.Context) ([]string, error) {
	cli, err := b.client()
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, gcTimeout)
	defer cancel()
	return gc(b.ctx(ctx), cli)
}

func gc(ctx context.Context, cli *containerd.Client) ([]string, error) {
	cs, err := cli.Containers(ctx, `labels."`+container.LabelRun+`"`)
	if err != nil {
		return nil, fmt.Errorf("containerd: listing cordon's containers: %w", err)
	}
	var cleaned []string
	var errs []error
	seen := map[string]bool{}
	for _, c := range cs {
		labels, err := c.Labels(ctx)
		if err != nil || !container.OwnerGone(labels[container.LabelOwner]) {
			continue
		}
		// A session's command cgroups keep the runtime from removing the task's.
		if ns, ok := namespaces.Namespace(ctx); ok {
			container.RemoveCommandCgroups(container.CgroupDir(filepath.Join(ns, c.ID())))
		}
		if err := removeContainer(ctx, c); err != nil {
			errs = append(errs, err)
			continue
		}
		seen[labels[container.LabelRun]] = true
		cleaned = append(cleaned, labels[container.LabelRun])
	}
	// Snapshots whose container was never created (cordon died in between).
	sn := cli.SnapshotService(containerd.DefaultSnapshotter)
	var orphans []string
	err = sn.Walk(ctx, func(ctx context.Context, info snapshots.Info) error {
		if run, ok := info.Labels[container.LabelRun]; ok && container.OwnerGone(info.Labels[container.LabelOwner]) {
			orphans = append(orphans, info.Name)
			if !seen[run] {
				seen[run] = true
				cleaned = append(cleaned, run)
			}
		}
		return nil
	}, `labels."`+container.LabelRun+`"`)
	if err != nil {
		errs = append(errs, fmt.Errorf("containerd: listing cordon's snapshots: %w", err))
	}
	for _, name := range orphans {
		if err := sn.Remove(ctx, name); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("containerd: removing snapshot %s: %w", name, err))
		}
	}
	return cleaned, errors.Join(errs...)
}

// StagedWorkspace implements sandbox.Sandbox.StagedWorkspace: the staged overlay attached
// on the host for the engine to bind.
func (s *instance) StagedWorkspace() (*os.File, error) { return container.StagedWorkspace(&s.in) }

// unmount detaches what cordon mounted for the engine, in reverse.
func (s *instance) unmount() error {
	var errs []error
	for i := len(s.unmounts) - 1; i >= 0; i-- {
		errs = append(errs, s.unmounts[i]())
	}
	s.unmounts = nil
	return errors.Join(errs...)
}

// SyncWorkspace implements sandbox.Sandbox.SyncWorkspace: nothing to bring back,
// the container binds the host's workspace.
func (s *instance) SyncWorkspace(context.Context, bool) error { return nil }
