// Package kubernetes is the backend that places a run's sandbox on a Kubernetes
// cluster: the sandbox is a Pod compiled from the Plan (package
// placement/kubernetes/podspec) whose process 1 is cordon-init, reached through the API
// server (placement/kubernetes's Channel). The runner around it is the one every
// backend has: its audit log, egress proxy, credentials and control channel are on
// this host, and the Pod is only where the commands run.
//
// The backend stands in for process 1 on the host side: once the Pod's process 1 has
// passed its self-check, the backend dials the run's control socket with the run's
// token, as process 1 does on the other backends, and relays the control protocol
// between it and the Pod's channel message by message, descriptors included. The
// commands' connections to the proxy address in the Pod arrive on the channel's
// egress listener, which the backend hands to the run's proxy
// ([sandbox.Host.ServeRelayed]): the contract's allowlist decides, on this host, as
// everywhere. In a run with gates, their connections to the gate socket in the Pod
// (`cordon gate NAME`) arrive on the channel's gate listener, which the backend hands
// to the run's gate service the same way: a person approves on this host, and the
// operation runs here, as everywhere.
//
// The placement's config is a file named by $CORDON_PLACEMENT_CONFIG (the format of
// `cordon explain --placement kubernetes`), the cluster's credentials a kubeconfig
// named by $CORDON_KUBECONFIG, else the Pod's ServiceAccount, else kubectl's rules;
// $CORDON_TENANT names the tenant the Pods are labelled with. `cordon serve` sets all
// three for a tenant placed on a cluster.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Environment variables the backend reads.
const (
	EnvConfig     = "CORDON_PLACEMENT_CONFIG"
	EnvKubeconfig = "CORDON_KUBECONFIG"
	EnvTenant     = "CORDON_TENANT"
)

// checkTimeout bounds Check's questions to the API server.
const checkTimeout = 15 * time.Second

// runningWait bounds Start's wait for the Pod to run. A Pod no node takes (no node
// has room for its requests, none matches it) stays Pending without end, and the
// kubelet reports no reason WaitRunning could tell from a slow start. It is under
// cordon serve's bound on a session's start (2 minutes), so that the supervisor, which
// outlives the start it was killed for, gives up, deletes the Pod and says why first.
const runningWait = 90 * time.Second

// Backend places sandboxes as Pods. Its methods are safe for concurrent use.
type Backend struct {
	mu     sync.Mutex // mu guards the fields below
	p      *placement.Placement
	rc     *rest.Config
	cfg    podspec.Config
	tenant string
}

// Backend implements every method of sandbox.Backend.
var _ sandbox.Backend = (*Backend)(nil)

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "kubernetes" }

// placement returns the placement, made once from the environment.
func (b *Backend) placement() (*placement.Placement, *rest.Config, podspec.Config, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p != nil {
		return b.p, b.rc, b.cfg, b.tenant, nil
	}
	file := os.Getenv(EnvConfig)
	if file == "" {
		return nil, nil, podspec.Config{}, "", errdefs.Unavailablef("kubernetes: no placement config: set %s to its file (the format `cordon explain --placement kubernetes --placement-config` reads)", EnvConfig)
	}
	cfg, err := podspec.ReadConfig(file)
	if err != nil {
		return nil, nil, podspec.Config{}, "", errdefs.Unavailablef("kubernetes: %w", err)
	}
	rc, err := placement.RESTConfig(os.Getenv(EnvKubeconfig))
	if err != nil {
		return nil, nil, podspec.Config{}, "", err
	}
	// Each session makes a handful of requests at its start and end; client-go's
	// default of 5 a second queued a warm claim's for ~400 ms (the pool benchmark).
	rc.QPS, rc.Burst = 50, 100
	p, err := placement.NewFromConfig(rc, cfg)
	if err != nil {
		return nil, nil, podspec.Config{}, "", err
	}
	tenant := os.Getenv(EnvTenant)
	if tenant == "" {
		tenant = "local"
	}
	b.p, b.rc, b.cfg, b.tenant = p, rc, cfg, tenant
	return p, rc, cfg, tenant, nil
}

// Check implements sandbox.Backend: the config is readable and valid, the API server
// answers, and the RuntimeClass the config names exists.
func (b *Backend) Check(ctx context.Context) error {
	p, _, _, _, err := b.placement()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		return err
	}
	return p.CheckRuntimeClass(ctx)
}

// HostUID implements sandbox.Backend: the sandbox runs on a node as the config's uid,
// never as a uid of this host.
func (b *Backend) HostUID(*contract.Plan) (int, bool, error) { return 0, false, nil }

// Warm implements sandbox.Backend: nothing is begun before Start (warm Pods are a
// pool's, claimed by the server).
func (b *Backend) Warm(*contract.Plan, int) func() { return nil }

// CanStage implements sandbox.Backend: a staged run's overlay is the host's; a Pod's
// workspace is on its node.
func (b *Backend) CanStage() error {
	return fmt.Errorf("kubernetes: %w", sandbox.ErrNoStage)
}

// LoopbackEgress implements sandbox.Backend: the Pod's commands have a network
// namespace of their own; their proxy connections are relayed
// ([sandbox.Host.ServeRelayed]).
func (b *Backend) LoopbackEgress() bool { return false }

// Start implements sandbox.Backend: it creates the session's Pod and its
// NetworkPolicy and waits until the Pod runs. What the run's services need of the
// sandbox is refused here, before anything is created, when a Pod cannot give it.
func (b *Backend) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	if err := refuse(plan, host); err != nil {
		return nil, err
	}
	p, rc, cfg, tenant, err := b.placement()
	if err != nil {
		return nil, err
	}
	// Object names are lowercase; a run id's only capitals are its fixed "T" and "Z",
	// so the lowercased id still names exactly this run.
	s := podspec.Session{Tenant: tenant, ID: strings.ToLower(host.RunID)}
	objs, err := p.Compile(plan, s)
	if err != nil {
		return nil, errdefs.Invalidf("kubernetes: %w", err)
	}
	if objs.Pod.Annotations == nil {
		objs.Pod.Annotations = map[string]string{}
	}
	objs.Pod.Annotations[podspec.AnnotationOwner] = ownerAnnotation()
	if err := p.Create(ctx, objs); err != nil {
		return nil, err
	}
	sb := &podSandbox{p: p, rc: rc, cfg: cfg, plan: plan, host: host, s: s}
	wctx, cancel := context.WithTimeout(ctx, runningWait)
	defer cancel()
	if err := p.WaitRunning(wctx, s); err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = errdefs.Unavailablef("kubernetes: pod %s/%s is not running %s after its creation (no node took it, or it is still starting): %w", cfg.Namespace, s.PodName(), runningWait, err)
		}
		return nil, errors.Join(err, sb.Close(ctx))
	}
	return sb, nil
}

// refuse says why plan cannot run in a Pod with what the runner prepared, or nil.
func refuse(plan *contract.Plan, host sandbox.Host) error {
	switch {
	case host.Stage != nil:
		return fmt.Errorf("kubernetes: %w", sandbox.ErrNoStage)
	case host.ServeRelayed == nil:
		return errdefs.Unavailablef("kubernetes: the runner gave no way to serve the Pod's egress and gates")
	}
	return nil
}
