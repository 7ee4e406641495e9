package seatbelt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// sandboxExec is sandbox-exec's fixed path: never looked up on PATH, which the caller
// controls.
const sandboxExec = "/usr/bin/sandbox-exec"

// Check implements sandbox.Backend: seatbelt runs wherever sandbox-exec is. What a
// given plan asks that macOS cannot enforce (limits, staging) is refused by Start, each
// with its reason.
func (b *Backend) Check(ctx context.Context) error {
	if _, err := os.Stat(sandboxExec); err != nil {
		return errdefs.Unavailablef("seatbelt: %w", err)
	}
	return nil
}

// LoopbackEgress implements sandbox.Backend.LoopbackEgress: a Seatbelt sandbox shares
// the host's network stack, so the proxy listens on a loopback port the profile allows.
func (b *Backend) LoopbackEgress() bool { return true }

// Start implements sandbox.Backend: it refuses what it cannot enforce, writes the
// credential files, generates the profile for the run's proxy port and directory and
// creates the private directories standing in for the plan's tmpfs mounts.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	if err := b.Check(ctx); err != nil {
		return nil, err
	}
	if err := refusals(plan, host); err != nil {
		return nil, err
	}
	_, p, err := net.SplitHostPort(host.EgressAddr)
	if err != nil {
		return nil, fmt.Errorf("seatbelt: egress address: %w", err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("seatbelt: egress port: %w", err)
	}
	s := &instance{plan: plan, host: host}
	params := Params{ProxyPort: port, RunDir: host.RunDir}
	sessionParams(&params, host)
	if len(host.SecretFiles) > 0 {
		params.Secrets = filepath.Join(host.RunDir, SecretsDirName)
		s.made = append(s.made, params.Secrets)
		if err := writeSecrets(params.Secrets, host.SecretFiles); err != nil {
			return nil, errors.Join(errdefs.Unavailablef("seatbelt: %w", err), s.Close(ctx))
		}
	}
	prof, err := Generate(plan, params)
	if err != nil {
		return nil, errors.Join(errdefs.Invalidf("seatbelt: %w", err), s.Close(ctx))
	}
	for _, d := range prof.Dirs {
		s.made = append(s.made, d.Host)
		if err := os.Mkdir(d.Host, 0o700); err != nil {
			return nil, errors.Join(errdefs.Unavailablef("seatbelt: private directory for %s: %w", d.For, err), s.Close(ctx))
		}
	}
	if err := linkGate(prof.Dirs, host); err != nil {
		return nil, errors.Join(errdefs.Unavailablef("seatbelt: %w", err), s.Close(ctx))
	}
	s.profile = prof
	s.env = gateEnv(sandboxEnv(host.Env, prof.Dirs, params.Secrets), host)
	return s, nil
}

// errNoMonitor is why the syscall monitor cannot watch a seatbelt sandbox: the runner
// refuses monitor.mode required with it and warns with it under best-effort.
var errNoMonitor = errors.New("seatbelt: the monitor is eBPF, which macOS does not have; it is off for this run")

// instance is one run's Seatbelt sandbox: a profile, an environment and the
// directories made for them. Each Exec is its own sandbox-exec under the profile.
type instance struct {
	plan    *contract.Plan
	host    sandbox.Host
	profile *Profile
	env     []string

	mu     sync.Mutex // mu guards made and closed.
	made   []string   // directories Start created, removed by Close
	closed bool

	warned sync.Once // the first Exec says the default limits are not enforced
}

// CgroupID implements sandbox.Sandbox.CgroupID: macOS has no cgroups, and the syscall
// monitor cannot watch a seatbelt sandbox.
func (s *instance) CgroupID() (uint64, error) { return 0, errNoMonitor }

// StartsEarly implements sandbox.Sandbox.StartsEarly: each Exec is one sandbox-exec,
// which never calls Process.Ready.
func (s *instance) StartsEarly() bool { return false }

// CommandCgroup implements sandbox.Sandbox.CommandCgroup: macOS has no cgroups (a
// command's processes are its process group, which the watcher kills).
func (s *instance) CommandCgroup(name string) (*sandbox.CommandCgroup, error) { return nil, nil }

// StagedWorkspace implements sandbox.Sandbox.StagedWorkspace: there are no staged
// seatbelt sandboxes (Backend.CanStage).
func (s *instance) StagedWorkspace() (*os.File, error) { return nil, sandbox.ErrNoStage }

// Exec implements sandbox.Sandbox.
func (s *instance) Exec(ctx context.Context, p sandbox.Process) (int, error) {
	dir := p.Dir
	if dir == "" {
		dir = s.plan.Workdir
	}
	dir = newMover(s.profile.Dirs, "").move(dir)
	if d := s.plan.Limits.Defaulted; len(d) > 0 && p.Stderr != nil {
		// Limits the contract asked for are refused by Start; the defaults are named.
		s.warned.Do(func() {
			fmt.Fprintf(p.Stderr, "cordon: warning: the default limits (%s) are not enforced: macOS has no cgroups\n", strings.Join(d, ", "))
		})
	}
	if p.Serve {
		return s.serve(ctx, p, dir)
	}
	return execProfile(ctx, s.host.Init, s.profile.SBPL, p.Argv, dir, s.env, stdio{p.Stdin, p.Stdout, p.Stderr})
}

// SpillShown implements sandbox.Sandbox.SpillShown: nothing is mounted, so a session's
// spill directory is where it is on the host, which the profile lets the sandbox read.
func (s *instance) SpillShown() string { return s.host.SpillDir }

// Close implements sandbox.Sandbox: it removes the credential files and the private
// directories (the runner removes the run directory after).
func (s *instance) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for i := len(s.made) - 1; i >= 0; i-- {
		if err := os.RemoveAll(s.made[i]); err != nil {
			errs = append(errs, fmt.Errorf("seatbelt: removing %s: %w", s.made[i], err))
		}
	}
	return errors.Join(errs...)
}

// SyncWorkspace implements sandbox.Sandbox.SyncWorkspace: nothing to bring back,
// commands write the host's workspace itself.
func (s *instance) SyncWorkspace(context.Context, bool) error { return nil }
