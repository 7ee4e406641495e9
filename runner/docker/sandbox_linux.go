package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/container"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// Explain says, for `cordon explain`, how the docker backend builds the sandbox from
// plan.
func (b *Backend) Explain(plan *contract.Plan) string {
	return container.Explain("docker", "--network none", plan)
}

// Start implements sandbox.Backend: it creates the run's container (not started yet).
// Each Exec starts it once. Containers that runs whose cordon is gone left behind
// are removed in the background.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	if err := b.Check(ctx); err != nil {
		return nil, err
	}
	cli, _ := b.client()
	s := &instance{cli: cli, gcDone: make(chan struct{})}
	go func() {
		defer close(s.gcDone)
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gcTimeout)
		defer cancel()
		_, _ = gc(gctx, cli)
	}()
	sb, err := s.create(ctx, plan, host)
	if err != nil {
		<-s.gcDone
		return nil, errors.Join(err, s.unmount()) // no container uses them
	}
	return sb, nil
}

func (s *instance) create(ctx context.Context, plan *contract.Plan, host sandbox.Host) (*instance, error) {
	in := container.Input{Plan: plan, Host: host, Image: plan.Image != ""}
	if err := container.HostIDs(&in); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if err := container.PrepareInit(&in); err != nil {
		return nil, errdefs.Unavailablef("docker: %w", err)
	}
	if host.Stage != nil {
		unstage, err := container.MountStage(&in)
		if err != nil {
			return nil, errdefs.Unavailablef("docker: staging the workspace: %w", err)
		}
		s.unmounts = append(s.unmounts, unstage)
	}
	unmap, err := container.MountIdmapped(&in)
	if err != nil {
		return nil, errdefs.Unavailablef("docker: idmapping the writable paths for the sandbox uid: %w", err)
	}
	s.unmounts = append(s.unmounts, unmap)
	etcDir := filepath.Join(host.RunDir, "etc")
	if err := writeEtc(etcDir); err != nil {
		return nil, errdefs.Unavailablef("docker: %w", err)
	}
	ref := plan.Image
	if in.Image {
		err = ensureImage(ctx, s.cli, ref, plan.Pull)
	} else {
		ref, err = hostViewImage(ctx, s.cli, in)
	}
	if err != nil {
		return nil, err
	}
	s.in = in
	s.cfg, s.hc = config(in, ref, etcDir, container.Labels(in, container.Owner()))
	s.writable = container.Writable(in, engineWritable...)
	if err := s.createContainer(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// createContainer creates the container of the next command, once the last one is
// removed (they share the run's name).
func (s *instance) createContainer(ctx context.Context) error {
	_ = s.waitRemoved(ctx) // a failed removal makes the create fail with the reason
	resp, err := s.cli.ContainerCreate(ctx, s.cfg, s.hc, nil, nil, container.Name(s.in.Host.RunID))
	if err != nil {
		return errdefs.Unavailablef("docker: creating the container: %w", err)
	}
	if resp.ID == "" { // never from a sound engine; a removal by name would miss it
		return errdefs.Unavailablef("docker: creating the container: the engine returned no id")
	}
	var cgID uint64
	cgDir := ""
	if s.in.Plan.Monitor.Mode != contract.MonitorOff {
		// The monitor watches the container's cgroup: make it now, to know its id.
		if rel := s.cgroupPath(ctx, resp.ID); rel != "" {
			if id, dir, err := container.PrecreateCgroup(rel); err == nil {
				cgID, cgDir = id, dir
			}
		}
	}
	s.mu.Lock()
	s.id, s.cgID, s.cgDir = resp.ID, cgID, cgDir
	s.mu.Unlock()
	return nil
}

// cgroupPath is where the engine puts the container's processes (relative to the
// cgroup v2 mount), or "" when it cannot say.
func (s *instance) cgroupPath(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	info, err := s.cli.Info(ctx)
	if err != nil {
		return ""
	}
	return cgroupRel(info.CgroupDriver, id)
}

// cgroupRel is where the engine's cgroup driver puts container id, relative to the
// cgroup v2 mount, or "" for a driver cordon does not know.
func cgroupRel(driver, id string) string {
	switch driver {
	case "cgroupfs":
		return "docker/" + id
	case "systemd":
		return "system.slice/docker-" + id + ".scope"
	}
	return ""
}

// CommandCgroup implements sandbox.Sandbox.CommandCgroup. The container's cgroup is
// found on the first call (an engine round trip), not for every run.
func (s *instance) CommandCgroup(name string) (*sandbox.CommandCgroup, error) {
	s.cgOnce.Do(func() {
		s.mu.Lock()
		id, dir := s.id, s.cgDir
		s.mu.Unlock()
		if dir != "" {
			s.cmdCgParent = dir
			return
		}
		if rel := s.cgroupPath(context.Background(), id); rel != "" {
			s.cmdCgParent = container.CgroupDir(rel)
		}
	})
	return container.CommandCgroup(s.cmdCgParent, s.in.UID, name)
}

// CgroupID implements sandbox.Sandbox.CgroupID: the cgroup v2 id of the current
// command's container, for the monitor; 0 when it has none (the monitor was not asked
// for, or the engine's layout is unknown).
func (s *instance) CgroupID() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cgID, nil
}

// StartsEarly implements sandbox.Sandbox.StartsEarly: the engine starts a container
// whole, so Exec never calls Process.Ready.
func (s *instance) StartsEarly() bool { return false }

// SpillShown implements sandbox.Sandbox.SpillShown: the container has a session's
// spill directory mounted at sandbox.SpillPath.
func (s *instance) SpillShown() string { return sandbox.SpillPath }

// current is the current container's id, or "" when there is none.
func (s *instance) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// removeContainer removes container id in the background, if it is still the current
// one (Close and the end of Exec may both ask; the first does it): its processes are
// killed (a forced removal sends SIGKILL, which ends even a stopped or traced process
// 1, and with it the pid namespace), and the engine's teardown overlaps what the runner
// does next. Close and the next Exec wait for it.
func (s *instance) removeContainer(ctx context.Context, id string) {
	s.mu.Lock()
	if id == "" || id != s.id {
		s.mu.Unlock()
		return
	}
	cgDir, rm := s.cgDir, &removal{done: make(chan struct{})}
	s.id, s.cgDir, s.removal = "", "", rm
	s.mu.Unlock()
	go func() {
		defer close(rm.done)
		defer container.RemoveCgroup(cgDir)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		err := s.cli.ContainerRemove(rctx, id, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			rm.err = fmt.Errorf("docker: removing container %s: %w (cordon gc removes it later)", shortID(id), err)
		}
	}()
}

// removal is one container's removal in the background.
type removal struct {
	done chan struct{} // closed when it is over
	err  error         // why it failed; set before done is closed
}

// waitRemoved waits until the last container is removed and returns why it could not
// be.
func (s *instance) waitRemoved(ctx context.Context) error {
	s.mu.Lock()
	rm := s.removal
	s.mu.Unlock()
	if rm == nil {
		return nil
	}
	select {
	case <-rm.done:
		return rm.err
	case <-ctx.Done():
		return fmt.Errorf("docker: waiting for the container's removal: %w", ctx.Err())
	}
}

// shortID is the 12-character form of a container id, as docker ps shows it (the id
// itself when shorter, "" included: an id is never sliced blindly).
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Deadlines of engine calls: no call cordon makes, in teardown above all, waits for
// an engine that does not answer for longer.
const (
	engineTimeout = 5 * time.Second  // a query (info, inspect)
	removeTimeout = 10 * time.Second // killing and removing a container
	gcTimeout     = 30 * time.Second // a whole gc pass
)

func writeEtc(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for _, f := range etcFiles {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(etcContent[f]), 0o444); err != nil {
			return err
		}
	}
	return nil
}

// ensureImage makes sure ref is present, pulling it only when the contract says
// `pull: missing`.
func ensureImage(ctx context.Context, cli *client.Client, ref, pull string) error {
	_, err := cli.ImageInspect(ctx, ref)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return errdefs.Unavailablef("docker: inspecting image %q: %w", ref, err)
	}
	if pull != "missing" {
		return errdefs.Unavailablef("docker: image %q is not present and the contract does not allow pulling (pull: never); load it (docker pull/load %s) or set pull: missing", ref, ref)
	}
	rc, err := cli.ImagePull(ctx, ref, image.PullOptions{})
	if err == nil {
		err = jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil)
		rc.Close()
	}
	if err != nil {
		return errdefs.Unavailablef("docker: pulling image %q (pull: missing): %w", ref, err)
	}
	return nil
}

// hostViewImage returns the skeleton image of the host view, importing it the first
// time (from memory: no registry is involved). Its tag is its content's digest.
func hostViewImage(ctx context.Context, cli *client.Client, in container.Input) (string, error) {
	tarball := container.Skeleton(in)
	sum := sha256.Sum256(tarball)
	ref := "cordon-host-view:" + hex.EncodeToString(sum[:6])
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(tarball), SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{"LABEL cordon.image=host-view"}, Message: "cordon host view skeleton"})
	if err == nil {
		err = jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, nil)
		rc.Close()
	}
	if err != nil {
		return "", errdefs.Unavailablef("docker: importing the host view's skeleton image: %w", err)
	}
	return ref, nil
}

// instance is one run's containers: one per command, created from the same
// configuration. Exec may be called once at a time; Close may be called while it runs,
// and then kills its container.
type instance struct {
	// unmounts detach, in reverse, what cordon mounted on the host for the engine to
	// bind (a staged run's overlay, idmapped sources), each registered as it is made.
	unmounts []func() error
	cli      *client.Client
	in       container.Input
	cfg      *dcontainer.Config
	hc       *dcontainer.HostConfig
	writable []string
	gcDone   chan struct{} // closed when the background gc is over

	// mu guards id, cgID, cgDir and removal: Close may run while an Exec does (a
	// session's process 1 that does not end when the host hangs up).
	mu      sync.Mutex
	id      string   // the current container; "" once it is being removed
	cgID    uint64   // its cgroup v2 id, when the monitor asked for it
	cgDir   string   // the cgroup directory cordon made for it, or ""
	removal *removal // the last container's removal; nil before
	// cmdCgParent is the container's cgroup directory, where a session's command
	// cgroups go, found once (cgOnce).
	cgOnce      sync.Once
	cmdCgParent string

	closeOnce sync.Once
	closeErr  error
}

// Exec implements sandbox.Sandbox.
func (s *instance) Exec(ctx context.Context, p sandbox.Process) (int, error) {
	if len(p.Argv) == 0 && !p.Serve {
		return 0, errdefs.Invalidf("empty command")
	}
	if s.current() == "" {
		if err := s.createContainer(ctx); err != nil {
			return 0, err
		}
	}
	id := s.current()
	defer s.removeContainer(ctx, id)
	h, err := container.Hand("docker", s.in, p, s.writable)
	if err != nil {
		return 0, err
	}
	defer h.Close() // pid1 kills the container when the status closes early (cordon killed)
	status := h.Status
	att, err := s.cli.ContainerAttach(ctx, id, dcontainer.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return 0, errdefs.Unavailablef("docker: attaching to the container: %w", err)
	}
	defer att.Close()
	// Waiting must be set up before the start, or a quick exit could be missed.
	bg := context.WithoutCancel(ctx)
	waitC, waitErr := s.cli.ContainerWait(bg, id, dcontainer.WaitConditionNextExit)
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		_, _ = stdcopy.StdCopy(orDiscard(p.Stdout), orDiscard(p.Stderr), att.Reader)
	}()
	go func() {
		if p.Stdin != nil {
			_, _ = io.Copy(att.Conn, p.Stdin)
		}
		_ = att.CloseWrite() // the command sees end of file
	}()
	if err := s.cli.ContainerStart(ctx, id, dcontainer.StartOptions{}); err != nil {
		return 0, errdefs.Unavailablef("docker: starting the container: %w", err) // a deadline met here is the command's timeout
	}
	stC := make(chan statusResult, 1)
	go func() {
		st, ok := wire.ReadStatus(status)
		stC <- statusResult{st, ok}
	}()

	var code int
	select {
	case w := <-waitC:
		if w.Error != nil {
			return 0, errdefs.Unavailablef("docker: waiting for the container: %s", w.Error.Message)
		}
		code = int(w.StatusCode)
	case err := <-waitErr:
		return 0, errdefs.Unavailablef("docker: waiting for the container: %w", err)
	case <-ctx.Done():
		s.kill(bg, id, waitC, waitErr)
		return 0, ctx.Err()
	}
	// The status line, if pid1 wrote one, is in the pipe by now.
	_ = status.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	st := <-stC
	select {
	case <-outDone: // every byte of output is delivered before Exec returns
	case <-time.After(5 * time.Second):
	}
	switch {
	case !st.ok:
		return 0, errdefs.Unavailablef("docker: the container exited (status %d) before cordon's process 1 reported", code)
	case !st.status.OK:
		return 0, fmt.Errorf("%w: its self-check: %s", errdefs.ErrSandbox, st.status.Error)
	}
	if s.in.Plan.Limits.Memory > 0 && code != 0 && p.Stderr != nil && s.oomKilled(bg, id, code) {
		fmt.Fprintf(p.Stderr, "cordon: the memory limit (limits.memory: %d bytes) killed a process of the command\n", s.in.Plan.Limits.Memory)
	}
	return code, nil
}

// oomKilled reports whether the engine saw the memory limit kill a process of the
// container. The engine learns of it from an event of its own that may come after the
// container's exit: a status of 137 (SIGKILL, what the OOM killer sends) is asked about
// again for up to oomWait; any other status once.
func (s *instance) oomKilled(ctx context.Context, id string, code int) bool {
	deadline := time.Now().Add(oomWait)
	for {
		ictx, cancel := context.WithTimeout(ctx, engineTimeout)
		info, err := s.cli.ContainerInspect(ictx, id)
		cancel()
		if err == nil && info.State != nil && info.State.OOMKilled {
			return true
		}
		if err != nil || code != 128+9 || time.Now().After(deadline) {
			return false
		}
		time.Sleep(oomPoll)
	}
}

// How long and how often oomKilled asks again.
const (
	oomWait = 2 * time.Second
	oomPoll = 50 * time.Millisecond
)

type statusResult struct {
	status wire.Status
	ok     bool
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// kill stops the container and everything in it: SIGKILL to process 1 ends its pid
// namespace. It waits (a bounded time) until the engine saw the exit.
func (s *instance) kill(ctx context.Context, id string, waitC <-chan dcontainer.WaitResponse, waitErr <-chan error) {
	kctx, cancel := context.WithTimeout(ctx, removeTimeout)
	defer cancel()
	if err := s.cli.ContainerKill(kctx, id, "KILL"); err != nil {
		return
	}
	select {
	case <-waitC:
	case <-waitErr:
	case <-kctx.Done():
	}
}

// Close implements sandbox.Sandbox: it makes sure the last container is removed,
// killing it first if an Exec still runs in it (a session's process 1 that did not
// end when the host hung up: stopped, traced or hung). Every engine call it makes has
// a deadline, whatever ctx's.
func (s *instance) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout+time.Second)
		defer cancel()
		s.removeContainer(ctx, s.current()) // created and never run, or still running
		s.closeErr = s.waitRemoved(ctx)
		s.closeErr = errors.Join(s.closeErr, s.unmount())
		select {
		case <-s.gcDone:
		case <-ctx.Done():
		}
	})
	return s.closeErr
}

// HostUID implements sandbox.Backend.HostUID: a root-owned workspace (or other writable
// source) gets a host uid of the run's own, as bwrap's does.
func (b *Backend) HostUID(plan *contract.Plan) (int, bool, error) { return container.HostUID(plan) }

// CanStage implements sandbox.Backend.CanStage: cordon mounts the staged overlay on the
// host for the engine to bind, which takes root.
func (b *Backend) CanStage() error { return container.CanStage("docker") }

// GC removes the containers of runs whose cordon process is gone (killed with -9) and
// returns their run ids. An engine that does not answer has nothing to collect.
func (b *Backend) GC(ctx context.Context) ([]string, error) {
	if b.Check(ctx) != nil {
		return nil, nil
	}
	cli, _ := b.client()
	ctx, cancel := context.WithTimeout(ctx, gcTimeout)
	defer cancel()
	return gc(ctx, cli)
}

func gc(ctx context.Context, cli *client.Client) ([]string, error) {
	list, err := cli.ContainerList(ctx, dcontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", container.LabelRun))})
	if err != nil {
		return nil, fmt.Errorf("docker: listing cordon's containers: %w", err)
	}
	var cleaned []string
	var errs []error
	driver := ""
	for _, c := range list {
		if !container.OwnerGone(c.Labels[container.LabelOwner]) {
			continue
		}
		if driver == "" {
			if info, err := cli.Info(ctx); err == nil {
				driver = info.CgroupDriver
			}
		}
		// A session's command cgroups keep the runtime from removing the container's.
		container.RemoveCommandCgroups(container.CgroupDir(cgroupRel(driver, c.ID)))
		err := cli.ContainerRemove(ctx, c.ID, dcontainer.RemoveOptions{Force: true, RemoveVolumes: true})
		if cerrdefs.IsConflict(err) {
			err = waitRemoved(ctx, cli, c.ID) // another gc (or its teardown) is removing it
		}
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("docker: removing container %s: %w", shortID(c.ID), err))
			continue
		}
		cleaned = append(cleaned, c.Labels[container.LabelRun])
	}
	return cleaned, errors.Join(errs...)
}

// waitRemoved waits until the engine has removed container id, which someone else is
// removing; nil once it is gone.
func waitRemoved(ctx context.Context, cli *client.Client, id string) error {
	done, failed := cli.ContainerWait(ctx, id, dcontainer.WaitConditionRemoved)
	select {
	case <-done:
		return nil
	case err := <-failed:
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return err
	}
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
