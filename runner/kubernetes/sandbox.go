package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// podSandbox is one run's Pod.
type podSandbox struct {
	p    *placement.Placement
	rc   *rest.Config
	cfg  podspec.Config
	plan *contract.Plan
	host sandbox.Host
	s    podspec.Session

	mu     sync.Mutex // mu guards ch, closed and attached
	ch     *placement.Channel
	closed bool
	// attached: process 1 takes one attach; a second Exec is refused.
	attached bool

	// syncMu makes fills and syncs one at a time (the relay's after a command's exit,
	// the runner's before a command and at a session's end); it guards known and
	// stamps.
	syncMu sync.Mutex
	// known is the workspace's paths the Pod had at the last fill or sync.
	known  map[string]bool
	stamps map[string]stamp // how the last fill or sync left each known path on the host
	bytes  int64            // the regular files' sizes in stamps, added up
	// inStep: the last sync took the Pod's pack whole, so the next may take only
	// what changed since (placement's PackChanges).
	inStep bool
	// kept is the paths the host kept at a sync (it changed them since the last one
	// while the Pod had them, or made them while the Pod made them too): the host's for
	// the rest of the session. keptNow collects them during a sync, kept once it
	// succeeded.
	kept, keptNow map[string]bool
	// wroteIn is, during a sync, each directory the sync writes or removes something
	// in, true when the host had changed it before (hostChanged): the sync's own
	// writes move a directory's times, and a directory the host had not changed is
	// stamped anew once the sync succeeded, as the paths it names are.
	wroteIn map[string]bool
}

// Exec implements sandbox.Sandbox. For a session (p.Serve) it attaches to the Pod's
// process 1, stands in for it on the run's control socket and relays until either
// side ends; otherwise it runs p's one command through the channel.
func (sb *podSandbox) Exec(ctx context.Context, p sandbox.Process) (int, error) {
	ch, err := sb.attach(ctx)
	if err != nil {
		return 0, err
	}
	defer sb.closeChannel()
	// The hello first, then the fill, before any request is relayed: the runner bounds
	// its wait for a hello (a minute), and a large workspace can take longer than that
	// to fill through the API server. Syncs wait for the fill (syncMu): none may read
	// the Pod's workspace half filled.
	sb.syncMu.Lock()
	host, err := sb.handOver(ch)
	if err == nil {
		if err = sb.fill(ctx, ch); err != nil {
			host.Close()
		}
	}
	sb.syncMu.Unlock()
	if err != nil {
		return 0, err
	}
	defer host.Close()
	if p.Serve {
		return 0, relay(host, ch, func() error { return sb.syncAfter(ch, false) })
	}
	host.Close() // a one-command run takes no commands on the control socket
	code, err := ch.Run(ctx, p.Argv, p.Dir, p.Stdin, p.Stdout, p.Stderr)
	if serr := sb.syncAfter(ch, true); err == nil {
		err = serr
	}
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err() // closing the channel (deferred) kills what it started
	}
	return code, err
}

// syncTimeout bounds bringing the workspace back after a command; syncTries is how
// many packs a sync may take (a file a background process is writing changes size
// under the pack, which then fails and is tried again).
const (
	syncTimeout = 5 * time.Minute
	syncTries   = 3
)

// syncAfter brings the Pod's workspace back after a command ended, before the runner
// hears of its end (and diffs the host's workspace). It survives the command's own
// cancellation: a timed-out command's changes are logged too. When it fails the run
// is not to go on without them: the caller ends the session. whole reads the whole
// workspace (the last sync: see sync).
func (sb *podSandbox) syncAfter(ch *placement.Channel, whole bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	var err error
	for range syncTries {
		if err = sb.sync(ctx, ch, whole); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: kubernetes: %w", errdefs.ErrSandbox, err)
	}
	return nil
}

// SyncWorkspace implements sandbox.Sandbox.SyncWorkspace: the Pod's workspace is
// brought back as after a command's end. Before the fill there is nothing to bring
// back; once the channel is gone nothing can be, which is an error: what the Pod's
// commands changed since the last sync is not on the host, nor in the log.
func (sb *podSandbox) SyncWorkspace(_ context.Context, last bool) error {
	sb.mu.Lock()
	ch, attached := sb.ch, sb.attached
	sb.mu.Unlock()
	if ch == nil {
		if !attached {
			return nil
		}
		return fmt.Errorf("%w: kubernetes: the Pod's control channel is gone: what its commands changed since the last command's end is not brought back", errdefs.ErrSandbox)
	}
	return sb.syncAfter(ch, last)
}

// attach opens the control channel of the Pod's process 1 with its spec.
func (sb *podSandbox) attach(ctx context.Context) (*placement.Channel, error) {
	sb.mu.Lock()
	if sb.closed || sb.attached {
		sb.mu.Unlock()
		return nil, errdefs.Unavailablef("kubernetes: the Pod's process 1 was already attached to (or the sandbox is closed)")
	}
	sb.attached = true
	sb.mu.Unlock()
	spec := podspec.InitSpec(sb.plan, sb.cfg, trustWorkspace(sb.host.Env, sb.plan.Workspace))
	spec.Egress = sandbox.ProxyAddr
	if sb.host.GateSocket != "" {
		// The run serves its gate socket on this host; the Pod's process 1 listens on
		// the Pod's, whose connections the channel relays to it (handOver).
		spec.Gate = podspec.GateSocket
	}
	if len(sb.host.SecretFiles) > 0 {
		spec.FilesDir = paths.SandboxSecrets
		for _, f := range sb.host.SecretFiles {
			spec.Files = append(spec.Files, wire.File{Name: f.Name, Value: f.Value.Reveal()})
		}
	}
	ch, err := sb.p.Attach(ctx, sb.rc, sb.s, spec)
	if err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closed {
		ch.Close()
		return nil, errdefs.Unavailablef("kubernetes: the sandbox was closed while its Pod was attached to")
	}
	sb.ch = ch
	return ch, nil
}

// trustWorkspace is env with git told to trust the workspace's repository: in a Pod
// its files belong to the uid that filled the volume, which the commands' user
// namespace does not map, and git refuses a repository of another owner ("dubious
// ownership") before doing anything. The repository is the one the contract names;
// its .git is read-only to commands whoever owns it. An env that sets git's config
// through the environment already (GIT_CONFIG_COUNT) is left as it is.
func trustWorkspace(env []string, workspace string) []string {
	if workspace == "" {
		return env
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GIT_CONFIG_COUNT=") {
			return env
		}
	}
	return append(slices.Clip(env), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0="+workspace)
}

// handOver gives the run's proxy the channel's egress listener (and, in a run with
// gates, the run's gate service the channel's gate listener) and says hello on the
// run's control socket as process 1 would (with its token, no descriptor: the
// listener was relayed), and waits for the runner's ready.
func (sb *podSandbox) handOver(ch *placement.Channel) (*ctl.Conn, error) {
	if ch.Egress == nil {
		return nil, errdefs.Unavailablef("kubernetes: the Pod's channel has no egress listener")
	}
	if err := sb.host.ServeRelayed(sandbox.RelayedEgress, ch.Egress); err != nil {
		return nil, err
	}
	if sb.host.GateSocket != "" {
		if ch.Gate == nil {
			return nil, errdefs.Unavailablef("kubernetes: the Pod's channel has no gate listener")
		}
		if err := sb.host.ServeRelayed(sandbox.RelayedGate, ch.Gate); err != nil {
			return nil, err
		}
	}
	if sb.host.ControlSocket == "" {
		return nil, errdefs.Unavailablef("kubernetes: the runner gave no control socket")
	}
	c, err := ctl.Dial(sb.host.ControlSocket)
	if err != nil {
		return nil, errdefs.Unavailablef("kubernetes: dialling the run's control socket: %w", err)
	}
	if err := c.Send(ctl.Msg{Op: ctl.OpHello, Token: sb.host.ControlToken}); err != nil {
		c.Close()
		return nil, errdefs.Unavailablef("kubernetes: hello on the run's control socket: %w", err)
	}
	m, files, err := c.Recv()
	ctl.CloseFiles(files)
	if err != nil || m.Op != ctl.OpReady {
		c.Close()
		return nil, fmt.Errorf("%w: kubernetes: the runner refused the Pod's hand-over (%v)", errdefs.ErrSandbox, err)
	}
	return c, nil
}

// relay copies the control protocol between the runner (host) and the Pod's process 1
// (ch) until either ends: requests (exec with its descriptors, signal) to the Pod,
// their exits back, each once beforeExit (the workspace brought back) returned; its
// error ends the session. The Pod's side checks what it is sent (package ctlmux); nothing
// from the Pod but an exit reaches the runner, which reads nothing else.
func relay(host *ctl.Conn, ch *placement.Channel, beforeExit func() error) error {
	errc := make(chan error, 2)
	go func() { errc <- forward(host, ch.Conn, true, nil, ctl.OpExec, ctl.OpSignal) }()
	go func() { errc <- forward(ch.Conn, host, false, beforeExit, ctl.OpExit) }()
	err := <-errc
	// Either side gone ends both: the runner's hang-up ends the Pod's process 1
	// (which kills every command), and the Pod's end is the session's end.
	host.Close()
	ch.Conn.Close()
	<-errc
	if errors.Is(err, errHostDone) {
		return nil
	}
	return err
}

// errHostDone: the runner hung up, which is how a session ends.
var errHostDone = errors.New("the runner hung up")

// forward copies messages of the ops allowed from src (the runner when fromHost) to
// dst until src ends, calling before (when set) ahead of each.
func forward(src, dst *ctl.Conn, fromHost bool, before func() error, allowed ...string) error {
	for {
		m, files, err := src.Recv()
		if err != nil {
			ctl.CloseFiles(files)
			if fromHost {
				return errHostDone
			}
			return fmt.Errorf("%w: the Pod's control channel ended: %w", errdefs.ErrSandbox, err)
		}
		ok := false
		for _, op := range allowed {
			ok = ok || m.Op == op
		}
		if !ok {
			ctl.CloseFiles(files)
			continue
		}
		if !fromHost {
			// An exit carries no descriptor: none from the Pod's side reaches the runner.
			ctl.CloseFiles(files)
			files = nil
		}
		if before != nil {
			if err := before(); err != nil {
				ctl.CloseFiles(files)
				return err
			}
		}
		err = dst.Send(m, files...)
		ctl.CloseFiles(files)
		if err != nil {
			return fmt.Errorf("relaying %s: %w", m.Op, err)
		}
	}
}

// closeChannel ends the channel: the Pod's process 1 kills every command and exits.
func (sb *podSandbox) closeChannel() {
	sb.mu.Lock()
	ch := sb.ch
	sb.ch = nil
	sb.mu.Unlock()
	if ch != nil {
		ch.Close()
	}
}

// Close implements sandbox.Sandbox: the channel, then the Pod and its NetworkPolicy.
func (sb *podSandbox) Close(ctx context.Context) error {
	sb.mu.Lock()
	if sb.closed {
		sb.mu.Unlock()
		return nil
	}
	sb.closed = true
	sb.mu.Unlock()
	sb.closeChannel()
	return sb.p.Delete(ctx, sb.s)
}

// StartsEarly implements sandbox.Sandbox: the Pod runs before Exec.
func (sb *podSandbox) StartsEarly() bool { return false }

// CgroupID implements sandbox.Sandbox: the Pod's cgroup is on its node's kernel,
// which this host's syscall monitor cannot watch.
func (sb *podSandbox) CgroupID() (uint64, error) {
	return 0, errors.New("a Pod's cgroup is on its node, out of this host's reach")
}

// CommandCgroup implements sandbox.Sandbox: commands share the Pod's cgroup, and a
// command's timeout kills its process group (process 1 does).
func (sb *podSandbox) CommandCgroup(string) (*sandbox.CommandCgroup, error) { return nil, nil }

// StagedWorkspace implements sandbox.Sandbox.
func (sb *podSandbox) StagedWorkspace() (*os.File, error) {
	return nil, fmt.Errorf("kubernetes: %w", sandbox.ErrNoStage)
}

// SpillShown implements sandbox.Sandbox: the spill directory is on this host, not in
// the Pod; the host path is what the output's last line names.
func (sb *podSandbox) SpillShown() string { return sb.host.SpillDir }
