package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// Errors of the warm pool.
var (
	// ErrNoWarmPod: no warm Pod of the template was running when the session claimed
	// one (the pool is filling, or other claimers took every one first). Nothing was
	// changed: create the session's objects cold ([Placement.Create]).
	ErrNoWarmPod = errors.New("no warm pod ready")
	// ErrPoolClosed: the pool was closed; it claims nothing.
	ErrPoolClosed = errors.New("the warm pool is closed")
)

// Bounds and defaults of [PoolConfig].
const (
	DefaultPoolSize   = 2
	MaxPoolSize       = 32
	DefaultPoolStarts = 2
	// DefaultWarmAge is how long a warm Pod waits to be claimed before it is retired
	// (deleted and replaced): well before its process 1 stops waiting for an attach
	// (sandboxinit.PodAttachWait, 10 minutes, from its start, which follows the Pod's
	// creation), leaving a claim its attach (attachTimeout, a minute) and the clocks
	// of the server and the API server some skew.
	DefaultWarmAge = 7 * time.Minute
	// MaxWarmAge bounds PoolConfig.MaxAge for the same reason.
	MaxWarmAge = 8 * time.Minute
)

// Bounds of the pool's own work.
const (
	// warmStartTimeout retires a warm Pod that does not run this long after its
	// creation (a node refusing its container would hold its place for ever).
	warmStartTimeout = 2 * time.Minute
	// poolInterval is how often the pool looks at its Pods when nothing is claimed.
	poolInterval = 2 * time.Second
	// claimTimeout bounds a claim, whatever the caller's context.
	claimTimeout = 30 * time.Second
	// claimTries bounds the Pods a claim tries when others take them first.
	claimTries = 8
	// maxCreateBackoff bounds the pause after creations failing in a row (2 s,
	// doubled by each failure).
	maxCreateBackoff = time.Minute
)

// Log field keys of the pool.
const (
	logPod      = "pod"
	logTemplate = "template"
	logReason   = "reason"
	logErr      = "err"
)

// PoolConfig sizes a warm pool. Zero fields mean the defaults.
type PoolConfig struct {
	// Size is how many warm Pods the pool keeps, starting or running (default
	// DefaultPoolSize, at most MaxPoolSize).
	Size int
	// Starts bounds the warm Pods starting at once, creations included: how hard a
	// refill presses the nodes (default DefaultPoolStarts, at most Size).
	Starts int
	// MaxAge is how long after its creation an unclaimed warm Pod is retired
	// (default DefaultWarmAge, at most MaxWarmAge).
	MaxAge time.Duration
	// Logger logs the pool's background work (nil: nothing is logged).
	Logger *slog.Logger
}

func (c PoolConfig) withDefaults() (PoolConfig, error) {
	if c.Size == 0 {
		c.Size = DefaultPoolSize
	}
	if c.Starts == 0 {
		c.Starts = min(DefaultPoolStarts, c.Size)
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultWarmAge
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var errs []error
	if c.Size < 0 || c.Size > MaxPoolSize {
		errs = append(errs, fmt.Errorf("size %d: want 1 to %d", c.Size, MaxPoolSize))
	}
	if c.Starts < 0 || c.Starts > c.Size {
		errs = append(errs, fmt.Errorf("starts %d: want 1 to the size, %d", c.Starts, c.Size))
	}
	if c.MaxAge < 0 || c.MaxAge > MaxWarmAge {
		errs = append(errs, fmt.Errorf("maxAge %s: want at most %s (process 1 waits for its attach at most 10 minutes)", c.MaxAge, MaxWarmAge))
	}
	return c, errors.Join(errs...)
}

// Pool keeps warm Pods of one template (a plan under the placement's config, for one
// tenant) running, for sessions to claim: a claimed Pod is relabelled as the
// session's and attached to with the session's spec, as a Pod created for it would
// be. A background loop replaces claimed and retired Pods. It is safe for concurrent
// use by multiple goroutines; Close ends it.
type Pool struct {
	p      *Placement
	plan   *contract.Plan
	tenant string
	hash   string // the template's: podspec.TemplateHash
	id     string // this pool's: the value of its Pods' podspec.LabelWarm
	pod    *corev1.Pod
	policy *networkingv1.NetworkPolicy
	cfg    PoolConfig
	now    func() time.Time

	kick     chan struct{} // a claim asks for a refill
	stop     context.CancelFunc
	done     chan struct{} // closed when the loop has ended
	creating atomic.Int32  // creations in flight
	creates  sync.WaitGroup

	// failMu guards the fields below: creations failing in a row, and when the
	// last failed, which hold the next ones back (createBackoff).
	failMu   sync.Mutex
	failures int
	failedAt time.Time

	// mu guards closed. Claims hold it for reading, so Close waits for those in
	// flight.
	mu     sync.RWMutex
	closed bool

	// takingMu guards taking: the Pods claims of this pool are updating, which the
	// others skip. Only this pool claims its Pods, so concurrent claims do not
	// contend; the update's precondition holds whatever happens.
	takingMu sync.Mutex
	taking   map[string]bool
}

// NewPool starts a warm pool of plan's template for tenant's sessions: it checks the
// RuntimeClass, creates the pool's NetworkPolicy (denying its warm Pods every
// connection, as a session's does), and fills the pool in the background. The pool
// outlives ctx; Close ends it.
func (p *Placement) NewPool(ctx context.Context, plan *contract.Plan, tenant string, cfg PoolConfig) (*Pool, error) {
	return p.newPool(ctx, plan, tenant, cfg, time.Now)
}

// newPool is NewPool on the clock now.
func (p *Placement) newPool(ctx context.Context, plan *contract.Plan, tenant string, cfg PoolConfig, now func() time.Time) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, errdefs.Invalidf("warm pool: %w", err)
	}
	id, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	// The template is any session's objects with the session taken out.
	objs, err := p.Compile(plan, podspec.Session{Tenant: tenant, ID: "warm"})
	if err != nil {
		return nil, err
	}
	if err := p.CheckRuntimeClass(ctx); err != nil {
		return nil, err
	}
	pl := &Pool{
		p: p, plan: plan, tenant: tenant, hash: podspec.TemplateHash(objs.Pod), id: id, cfg: cfg, now: now,
		kick: make(chan struct{}, 1), done: make(chan struct{}), taking: map[string]bool{},
	}
	pl.pod, pl.policy = pl.warmObjects(objs)
	ns := p.cfg.Namespace
	if _, err := p.client.NetworkingV1().NetworkPolicies(ns).Create(ctx, pl.policy, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the warm pool's network policy %s/%s: %w", ns, pl.policy.Name, err)
	}
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	pl.stop = stop
	go pl.loop(lctx)
	return pl, nil
}

// warmObjects are the pool's Pod (a template: each warm Pod is a copy with a name of
// its own) and NetworkPolicy, made from a session's objects.
func (pl *Pool) warmObjects(objs podspec.Objects) (*corev1.Pod, *networkingv1.NetworkPolicy) {
	pod := objs.Pod.DeepCopy()
	pod.Name = ""
	pod.Labels = map[string]string{
		podspec.LabelManagedBy: podspec.ManagedBy, podspec.LabelTenant: pl.tenant,
		podspec.LabelTemplate: pl.hash, podspec.LabelWarm: pl.id,
	}
	np := objs.NetworkPolicy.DeepCopy()
	np.Name = pl.name()
	np.Labels = map[string]string{podspec.LabelManagedBy: podspec.ManagedBy, podspec.LabelTenant: pl.tenant, podspec.LabelWarm: pl.id}
	np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{podspec.LabelTenant: pl.tenant, podspec.LabelWarm: pl.id}}
	return pod, np
}

// name is the pool's NetworkPolicy's name, and its Pods' names' prefix.
func (pl *Pool) name() string { return "cordon-warm-" + pl.id }

// Template is the hash of the pool's template ([podspec.TemplateHash]).
func (pl *Pool) Template() string { return pl.hash }

// selector selects the pool's warm (unclaimed) Pods.
func (pl *Pool) selector() string {
	return labels.SelectorFromSet(labels.Set{
		podspec.LabelTenant: pl.tenant, podspec.LabelTemplate: pl.hash, podspec.LabelWarm: pl.id,
	}).String()
}

// Claim takes a running warm Pod for session s (of the pool's tenant), or fails at
// once with an error wrapping [ErrNoWarmPod] when none is ready: it never waits for
// one. It creates the session's NetworkPolicy, then relabels the Pod as the
// session's with an update conditioned on the Pod's resourceVersion, so no two
// claimers ever take the same Pod (a claimer that loses the race tries the next).
// The claimed Pod carries the labels a Pod created for the session has, plus
// podspec.LabelTemplate, and no podspec.LabelWarm: the session's NetworkPolicy
// selects it, the pool's no longer does. It returns s naming the Pod (Session.Pod),
// for [Placement.Attach] and [Placement.Delete]. Whatever fails, nothing is left
// changed, and the caller may create the session's objects cold.
func (pl *Pool) Claim(ctx context.Context, s podspec.Session) (podspec.Session, error) {
	pl.mu.RLock()
	defer pl.mu.RUnlock()
	if pl.closed {
		return s, ErrPoolClosed
	}
	if s.Tenant != pl.tenant {
		return s, errdefs.Invalidf("claiming a warm pod of tenant %q for a session of tenant %q", pl.tenant, s.Tenant)
	}
	objs, err := pl.p.Compile(pl.plan, s)
	if err != nil {
		return s, err
	}
	if h := podspec.TemplateHash(objs.Pod); h != pl.hash {
		return s, fmt.Errorf("the session's pod is of template %s, the pool's of %s", h, pl.hash)
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	ns := pl.p.cfg.Namespace
	pods := pl.p.client.CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: pl.selector()})
	if err != nil {
		return s, fmt.Errorf("listing warm pods: %w", err)
	}
	ready := pl.ready(list.Items)
	if len(ready) == 0 {
		pl.refill()
		return s, fmt.Errorf("template %s: %w", pl.hash, ErrNoWarmPod)
	}
	// The policy first, so that the Pod is never the session's without it.
	nps := pl.p.client.NetworkingV1().NetworkPolicies(ns)
	if _, err := nps.Create(ctx, objs.NetworkPolicy, metav1.CreateOptions{}); err != nil {
		return s, fmt.Errorf("creating network policy %s/%s: %w", ns, objs.NetworkPolicy.Name, err)
	}
	defer pl.refill()
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer tcancel()
	var errs []error
	tries := 0
	for _, pod := range ready {
		if tries == claimTries || !pl.take(pod.Name) {
			continue
		}
		tries++
		claimed := pod.DeepCopy() // its resourceVersion is the update's precondition
		claimed.Labels = maps.Clone(objs.Pod.Labels)
		claimed.Labels[podspec.LabelTemplate] = pl.hash
		_, err := pods.Update(ctx, claimed, metav1.UpdateOptions{})
		pl.release(pod.Name)
		if err == nil {
			s.Pod = pod.Name
			return s, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			// The update may have been applied all the same (a cancelled request):
			// the Pod would be the session's, and nobody's. Delete it; at worst a
			// warm Pod is lost, and replaced.
			errs = append(errs, fmt.Errorf("claiming pod %s/%s: %w", ns, pod.Name, err))
			if derr := pl.deletePod(tctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}}); derr != nil {
				errs = append(errs, derr)
			}
			break
		}
		// Claimed, retired or gone since the list: the next.
	}
	if err := nps.Delete(tctx, objs.NetworkPolicy.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("removing network policy %s/%s again: %w", ns, objs.NetworkPolicy.Name, err))
	}
	if len(errs) == 0 {
		return s, fmt.Errorf("template %s: every ready pod was claimed by another: %w", pl.hash, ErrNoWarmPod)
	}
	return s, errors.Join(errs...)
}

// take reserves the Pod for one claim of this pool; false when another has it.
func (pl *Pool) take(name string) bool {
	pl.takingMu.Lock()
	defer pl.takingMu.Unlock()
	if pl.taking[name] {
		return false
	}
	pl.taking[name] = true
	return true
}

func (pl *Pool) release(name string) {
	pl.takingMu.Lock()
	defer pl.takingMu.Unlock()
	delete(pl.taking, name)
}

// ready are the claimable Pods of pods, the oldest first (the first to expire):
// running, not being deleted, and younger than the pool's MaxAge.
func (pl *Pool) ready(pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	now := pl.now()
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp == nil && running(pod) && now.Sub(pod.CreationTimestamp.Time) < pl.cfg.MaxAge {
			out = append(out, pod)
		}
	}
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return out
}

// Ready is how many warm Pods could be claimed now.
func (pl *Pool) Ready(ctx context.Context) (int, error) {
	list, err := pl.p.client.CoreV1().Pods(pl.p.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: pl.selector()})
	if err != nil {
		return 0, fmt.Errorf("listing warm pods: %w", err)
	}
	return len(pl.ready(list.Items)), nil
}

// running says the Pod's sandbox container runs: its process 1 waits for an attach.
func running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == podspec.ContainerName {
			return c.State.Running != nil
		}
	}
	return false
}

// ended says the Pod's sandbox container will never run (again).
func ended(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == podspec.ContainerName && c.State.Terminated != nil {
			return true
		}
	}
	return false
}

// refill asks the loop to look at the pool now.
func (pl *Pool) refill() {
	select {
	case pl.kick <- struct{}{}:
	default:
	}
}

// Close stops the pool and deletes its warm Pods (not the claimed ones, which are
// their sessions') and its NetworkPolicy. It waits for claims and creations in
// flight and survives the caller's cancellation. Closing again does nothing.
func (pl *Pool) Close(ctx context.Context) error {
	pl.mu.Lock()
	was := pl.closed
	pl.closed = true
	pl.mu.Unlock()
	if was {
		return nil
	}
	pl.stop()
	<-pl.done
	pl.creates.Wait()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	ns := pl.p.cfg.Namespace
	var errs []error
	list, err := pl.p.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: pl.selector()})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing warm pods: %w", err))
	} else {
		for _, pod := range list.Items {
			// No claim is in flight, and none of another pool's takes these Pods:
			// no precondition, which a status update since the list would fail.
			pod.ResourceVersion = ""
			if err := pl.deletePod(ctx, &pod); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := pl.p.client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, pl.policy.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting network policy %s/%s: %w", ns, pl.policy.Name, err))
	}
	return errors.Join(errs...)
}

// deletePod deletes a warm Pod at once, on the condition that it is still the
// version listed (when pod has a resourceVersion): a Pod claimed since is the
// session's, and stays.
func (pl *Pool) deletePod(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	if pod.ResourceVersion != "" {
		opts.Preconditions = &metav1.Preconditions{ResourceVersion: &pod.ResourceVersion}
	}
	err := pl.p.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting warm pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	return hex.EncodeToString(b), nil
}
