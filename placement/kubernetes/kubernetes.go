package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// Errors of the placement.
var (
	// ErrNoRuntimeClass: the RuntimeClass the config names is not on the cluster.
	// Nothing was created (errdefs.ErrUnavailable, exit status 125).
	ErrNoRuntimeClass = errors.New("the cluster has no such RuntimeClass")
)

// teardownTimeout bounds the removal of a session's objects, which survives the
// caller's cancellation.
const teardownTimeout = 30 * time.Second

// Placement places sessions on one cluster, under one tenant's config. It holds no
// state of its own: it is safe for concurrent use by multiple goroutines.
type Placement struct {
	client kubernetes.Interface
	cfg    podspec.Config
}

// New returns a placement that creates objects through client under cfg.
func New(client kubernetes.Interface, cfg podspec.Config) (*Placement, error) {
	if err := cfg.Validate(); err != nil {
		return nil, errdefs.Invalidf("kubernetes placement: %w", err)
	}
	return &Placement{client: client, cfg: cfg}, nil
}

// Compile is [podspec.Compile] under the placement's config.
func (p *Placement) Compile(plan *contract.Plan, s podspec.Session) (podspec.Objects, error) {
	return podspec.Compile(plan, s, p.cfg)
}

// Create checks the cluster, then creates objs: the NetworkPolicy, then the Pod. When
// the Pod cannot be created, the NetworkPolicy is removed again: a failed Create
// leaves nothing behind.
func (p *Placement) Create(ctx context.Context, objs podspec.Objects) error {
	if err := p.CheckRuntimeClass(ctx); err != nil {
		return err
	}
	ns := p.cfg.Namespace
	np, err := p.client.NetworkingV1().NetworkPolicies(ns).Create(ctx, objs.NetworkPolicy, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating network policy %s/%s: %w", ns, objs.NetworkPolicy.Name, err)
	}
	if _, err := p.client.CoreV1().Pods(ns).Create(ctx, objs.Pod, metav1.CreateOptions{}); err != nil {
		err = fmt.Errorf("creating pod %s/%s: %w", ns, objs.Pod.Name, err)
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
		defer cancel()
		if derr := p.client.NetworkingV1().NetworkPolicies(ns).Delete(tctx, np.Name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("removing network policy %s/%s again: %w", ns, np.Name, derr))
		}
		return err
	}
	return nil
}

// CheckRuntimeClass returns an error wrapping [ErrNoRuntimeClass] when the config
// names a RuntimeClass the cluster does not have: the Pod would otherwise be refused
// by admission only where the RuntimeClass admission plugin runs, or run on a
// runtime other than the one asked for.
func (p *Placement) CheckRuntimeClass(ctx context.Context) error {
	name := p.cfg.RuntimeClass
	if name == "" {
		return nil
	}
	_, err := p.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return errdefs.Unavailablef("runtimeClassName %q: %w; create it (with a handler the nodes' runtime has) or change the placement's runtimeClass", name, ErrNoRuntimeClass)
	case err != nil:
		return errdefs.Unavailablef("checking RuntimeClass %q: %w", name, err)
	}
	return nil
}

// Delete removes the session's Pod (at once: no grace period; s.PodName(), so a
// claimed warm Pod too) and NetworkPolicy. Objects already gone are not an error. It
// survives the caller's cancellation.
func (p *Placement) Delete(ctx context.Context, s podspec.Session) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	ns, name, pod := p.cfg.Namespace, podspec.Name(s.ID), s.PodName()
	zero := int64(0)
	var errs []error
	if err := p.client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", ns, pod, err))
	}
	if err := p.client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting network policy %s/%s: %w", ns, name, err))
	}
	return errors.Join(errs...)
}

// Ping asks the API server for its version: the cluster answers the placement's
// credentials.
func (p *Placement) Ping(ctx context.Context) error {
	if _, err := p.client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw(); err != nil {
		return errdefs.Unavailablef("the cluster's API server does not answer: %w", err)
	}
	return nil
}
