package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/providers"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/hostexec"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// gates is a run's approval gates: the service holding requests, the socket the
// sandbox asks on (RUNDIR/gate.sock), and the host-only admin socket that `cordon gate
// ls|approve|deny` use (RUNROOT/gates/ID.sock, 0600).
type gates struct {
	svc       *gate.Service
	sandboxLn net.Listener
	adminLn   net.Listener
	adminPath string
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	mintMu    sync.Mutex // one gate credential minted at a time (the ledger keys by run and name)
	// relayed takes the one listener a relaying backend's sandbox asks on
	// (serveRelayed), served as sandboxLn is; relayedOnce refuses a second.
	relayed     chan net.Listener
	relayedOnce atomic.Bool
	decided     gateDecisions // how each running command's requests ended
}

// startGates serves the plan's gates, if any, and tells the backend to mount the gate
// socket and the `cordon` binary, on PATH.
func (r *run) startGates(ctx context.Context, host *sandbox.Host) error {
	if len(r.plan.Gates) == 0 {
		return nil
	}
	g := &gates{}
	r.gates = g
	// Refuses pending requests; operations running finish and revoke their credential.
	r.undo.add("closing the gates", func(context.Context) error { g.close(); return nil })
	g.svc = gate.New(gate.Config{
		RunID: r.res.RunID, Workspace: r.plan.Workspace, Gates: r.plan.Gates, Mode: r.o.Gates,
		Events: r.sink, Mint: g.minter(r), Log: r.o.Log, Policy: hostexec.PolicyOf(r.plan.HostWritable()),
		Before: r.afterBaseline, Decided: g.decided.keep,
	})
	var err error
	sock := filepath.Join(host.RunDir, "gate.sock")
	if g.sandboxLn, err = net.Listen("unix", sock); err != nil {
		return errdefs.Unavailablef("gate socket: %w", err)
	}
	dir := paths.Root(r.o.RunRoot).Gates()
	if err := paths.MakeDir(dir, paths.Owner()); err != nil {
		return errdefs.Unavailablef("gate admin directory: %w", err)
	}
	g.adminPath = filepath.Join(dir, r.res.RunID+".sock")
	if g.adminLn, err = net.Listen("unix", g.adminPath); err == nil {
		err = os.Chmod(g.adminPath, 0o600)
	}
	if err != nil {
		return errdefs.Unavailablef("gate admin socket: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancel
	g.wg.Add(2)
	go func() {
		defer g.wg.Done()
		_ = gate.ServeSandbox(sctx, g.sandboxLn, g.svc, func(c net.Conn) (string, error) {
			id, err := peerCommand(c)
			if id != "" || err != nil {
				// Exact: the asking process is in that command's cgroup; or it has
				// exited, and no command is credited with what it asked.
				return id, err
			}
			return r.sink.Current(), nil
		})
	}()
	go func() { defer g.wg.Done(); _ = gate.ServeAdmin(sctx, g.adminLn, g.svc) }()
	g.relayed = make(chan net.Listener, 1)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		select {
		case ln := <-g.relayed:
			// A relayed connection's peer is the relay in this process, not the asking
			// command (a Pod's commands are on its node): the request names the
			// session's current command.
			_ = gate.ServeSandbox(sctx, ln, g.svc, func(net.Conn) (string, error) { return r.sink.Current(), nil })
		case <-sctx.Done():
		}
	}()
	host.GateSocket = sock
	host.Env = appendPath(host.Env, sandbox.GateBinDir)
	return nil
}

// appendPath adds dir at the end of PATH in env (so it shadows nothing).
func appendPath(env []string, dir string) []string {
	out := append([]string(nil), env...)
	for i, kv := range out {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			out[i] = "PATH=" + v + ":" + dir
			return out
		}
	}
	return append(out, "PATH="+contract.DefaultPath+":"+dir)
}

// serveRelayed serves the gate service on ln too: where a relaying backend's sandbox
// asks (a Pod's gate socket, relayed to this host), in place of the gate socket
// mounted. It is taken once.
func (g *gates) serveRelayed(ln net.Listener) error {
	if !g.relayedOnce.CompareAndSwap(false, true) {
		ln.Close()
		return fmt.Errorf("%w: the gate listener was handed over twice", errdefs.ErrSandbox)
	}
	g.relayed <- ln // room for one, and this is the one
	return nil
}

// close refuses what is pending, waits for running operations (their credentials are
// revoked as each ends) and removes the sockets.
func (g *gates) close() {
	g.svc.Close()
	if g.cancel != nil {
		g.cancel()
	}
	for _, ln := range []net.Listener{g.sandboxLn, g.adminLn} {
		if ln != nil {
			ln.Close()
		}
	}
	g.wg.Wait()
	select {
	case ln := <-g.relayed: // handed over after the gates closed: never served
		ln.Close()
	default:
	}
	if g.adminPath != "" {
		os.Remove(g.adminPath)
	}
}

// minter issues a gate's credential for one operation through a broker of its own, so
// that the run's broker (whose grants live as long as the sandbox) never holds it:
// cred.issue and cred.revoke land in the run's log, the value is registered with its
// redactor, and the ledger lets gc revoke it after a crash.
func (g *gates) minter(r *run) gate.MintFunc {
	return func(ctx context.Context, c contract.Credential) ([]string, func(context.Context) error, error) {
		g.mintMu.Lock()
		root := creds.DefaultRoot()
		provs, err := providers.FromEnv(providers.Config{Root: root, Need: providers.Needed([]contract.Credential{c}), Stderr: r.o.Stderr, Policy: hostexec.PolicyOf(r.plan.HostWritable())})
		if err != nil {
			g.mintMu.Unlock()
			return nil, nil, errdefs.Unavailablef("credentials: %w", err)
		}
		b, err := creds.New(creds.Config{
			Root: root, Providers: provs, Redact: r.log.Redactor().Add, Events: r.sink,
			Alerts: r.o.Stderr, Logger: r.o.Log,
		})
		if err != nil {
			g.mintMu.Unlock()
			return nil, nil, errdefs.Unavailablef("credentials: %w", err)
		}
		c.Deliver = contract.DeliverGate // to the operation's environment, on the host; never into the sandbox
		grants, err := b.IssueAll(ctx, r.res.RunID, []contract.Credential{c})
		if err != nil {
			g.mintMu.Unlock()
			return nil, nil, err
		}
		var once sync.Once
		revoke := func(ctx context.Context) error {
			err := errors.New("already revoked")
			once.Do(func() {
				err = b.RevokeAll(ctx)
				g.mintMu.Unlock()
			})
			return err
		}
		var env []string
		for _, gr := range grants {
			env = append(env, gr.Name+"="+gr.Secret.Reveal())
		}
		return env, revoke, nil
	}
}
