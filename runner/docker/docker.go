// Package docker is the Docker backend: it translates a [contract.Plan] into a Docker
// container, one per run or session (no network, read-only root, every capability
// dropped, no-new-privileges, the engine's default seccomp profile, the workspace
// owner's uid:gid, the plan's limits), with cordon's own static binary bind-mounted
// read-only as process 1, which serves every command. It talks to the engine with the Docker Go client, API
// version negotiated (Debian's Docker 20.10 speaks API 1.41).
package docker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Backend runs sandboxes as Docker containers. Its methods are safe for concurrent
// use.
type Backend struct {
	// Host is the engine's address (unix:///var/run/docker.sock); "" means
	// $DOCKER_HOST, else Docker's default.
	Host string

	mu     sync.Mutex // guards the fields below
	cli    *client.Client
	pinged bool // the engine answered once: Check need not ask again
}

// Backend implements every method of sandbox.Backend on every GOOS.
var _ sandbox.Backend = (*Backend)(nil)

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "docker" }

// Warm implements sandbox.Backend.Warm: the engine does Start's work, and nothing is
// begun before it.
func (b *Backend) Warm(plan *contract.Plan, leased int) (release func()) { return nil }

// LoopbackEgress implements sandbox.Backend.LoopbackEgress: the container has a
// network namespace of its own, where process 1 listens for the egress proxy.
func (b *Backend) LoopbackEgress() bool { return false }

// client returns the engine client, creating it once.
func (b *Backend) client() (*client.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cli != nil {
		return b.cli, nil
	}
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if b.Host != "" {
		opts = append(opts, client.WithHost(b.Host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, errdefs.Unavailablef("docker: %w", err)
	}
	b.cli = cli
	return cli, nil
}

// Check implements sandbox.Backend: the engine must answer a ping within 3 seconds.
// The ping also settles the API version.
func (b *Backend) Check(ctx context.Context) error {
	cli, err := b.client()
	if err != nil {
		return err
	}
	b.mu.Lock()
	pinged := b.pinged
	b.mu.Unlock()
	if pinged {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ping, err := cli.Ping(ctx)
	if err != nil {
		return errdefs.Unavailablef("docker: the engine at %s does not answer (%w); start dockerd, or set DOCKER_HOST", cli.DaemonHost(), err)
	}
	cli.NegotiateAPIVersionPing(ping)
	b.mu.Lock()
	b.pinged = true
	b.mu.Unlock()
	return nil
}

// Describe says which engine answers, for `cordon backends`.
func (b *Backend) Describe(ctx context.Context) string {
	if err := b.Check(ctx); err != nil {
		return ""
	}
	cli, _ := b.client()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("Docker %s (API %s) at %s", v.Version, cli.ClientVersion(), cli.DaemonHost())
}
