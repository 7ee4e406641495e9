// Package containerd is the containerd backend: it translates a [contract.Plan] into
// one containerd container and task per command, in the namespace "cordon", from an
// OCI spec built as a list of options (empty network namespace, read-only root, every
// capability dropped, no-new-privileges, containerd's default seccomp profile, the
// workspace owner's uid:gid, the plan's limits), with cordon's own static binary
// bind-mounted read-only as process 1. It uses the containerd 1.7 Go client, which
// speaks the v1 API of the containerd 1.6 that Debian's docker.io runs on.
package containerd

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/namespaces"
	clog "github.com/containerd/log"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Defaults of [Backend]'s fields.
const (
	DefaultAddress   = "/run/containerd/containerd.sock"
	DefaultNamespace = "cordon"
	runtimeName      = "io.containerd.runc.v2"
)

// Backend runs sandboxes as containerd tasks. Its methods are safe for concurrent use.
type Backend struct {
	// Address is containerd's socket; "" means $CONTAINERD_ADDRESS, else
	// DefaultAddress.
	Address string
	// Namespace holds cordon's containers; "" means DefaultNamespace.
	Namespace string

	mu     sync.Mutex // guards the fields below
	cli    *containerd.Client
	cliErr error
}

// Backend implements every method of sandbox.Backend on every GOOS.
var _ sandbox.Backend = (*Backend)(nil)

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "containerd" }

// Warm implements sandbox.Backend.Warm: the engine does Start's work, and nothing is
// begun before it.
func (b *Backend) Warm(plan *contract.Plan, leased int) (release func()) { return nil }

// LoopbackEgress implements sandbox.Backend.LoopbackEgress: the container has a
// network namespace of its own, where process 1 listens for the egress proxy.
func (b *Backend) LoopbackEgress() bool { return false }

func (b *Backend) address() string {
	switch {
	case b.Address != "":
		return b.Address
	case os.Getenv("CONTAINERD_ADDRESS") != "":
		return os.Getenv("CONTAINERD_ADDRESS")
	}
	return DefaultAddress
}

func (b *Backend) namespace() string {
	if b.Namespace != "" {
		return b.Namespace
	}
	return DefaultNamespace
}

// client connects once; a failed connection is remembered (each try costs its
// timeout).
func (b *Backend) client() (*containerd.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cli == nil && b.cliErr == nil {
		if _, err := os.Stat(b.address()); err != nil {
			b.cliErr = err
		} else {
			// The client logs (pull retries, ...) through logrus to stderr, which is
			// the command's; cordon reports what matters in its own errors.
			clog.L.Logger.SetOutput(io.Discard)
			b.cli, b.cliErr = containerd.New(b.address(),
				containerd.WithDefaultNamespace(b.namespace()),
				containerd.WithDefaultRuntime(runtimeName), // no namespace label lookup
				containerd.WithTimeout(3*time.Second))
		}
	}
	if b.cliErr != nil {
		return nil, errdefs.Unavailablef("containerd: %s does not answer (%w); start containerd, or set CONTAINERD_ADDRESS", b.address(), b.cliErr)
	}
	return b.cli, nil
}

func (b *Backend) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, b.namespace())
}

// Check implements sandbox.Backend: containerd must accept a connection.
func (b *Backend) Check(ctx context.Context) error {
	_, err := b.client()
	return err
}

// Describe says which containerd answers, for `cordon backends`.
func (b *Backend) Describe(ctx context.Context) string {
	cli, err := b.client()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := cli.Version(b.ctx(ctx))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("containerd %s at %s, namespace %s", v.Version, b.address(), b.namespace())
}
