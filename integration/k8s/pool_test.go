//go:build k8s

package k8s

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/cordonhq/cordon/contract"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// warmPool is a warm pool of size Pods of the test plan's template in a fresh
// restricted namespace, closed at the end of the test.
type warmPool struct {
	p    *placement.Placement
	pool *placement.Pool
	plan *contract.Plan
	cfg  podspec.Config
}

func startPool(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, size int) warmPool {
	t.Helper()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	w := warmPool{plan: testPlan(t, image), cfg: podspec.Config{Namespace: ns, InitImage: image, NodeName: node, UID: testUID, GID: testUID}}
	var err error
	if w.p, err = placement.New(cs, w.cfg); err != nil {
		t.Fatal(err)
	}
	if w.pool, err = w.p.NewPool(ctx, w.plan, "acme", placement.PoolConfig{Size: size, Starts: size}); err != nil {
		t.Fatalf("starting the warm pool: %v", err)
	}
	t.Cleanup(func() {
		if err := w.pool.Close(context.Background()); err != nil {
			t.Errorf("closing the warm pool: %v", err)
		}
	})
	return w
}

// waitReady waits until n warm Pods can be claimed.
func (w warmPool) waitReady(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for {
		got, err := w.pool.Ready(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d warm pods: %d ready (%v)", n, got, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// session is a fresh session of the pool's tenant.
func (w warmPool) session(t *testing.T) podspec.Session {
	return podspec.Session{Tenant: "acme", ID: sessionID(t)}
}

// claim claims a warm Pod for s, deleting the session's objects at the end of the
// test.
func (w warmPool) claim(ctx context.Context, t *testing.T, s podspec.Session) podspec.Session {
	t.Helper()
	claimed, err := w.pool.Claim(ctx, s)
	if err != nil {
		t.Fatalf("claiming a warm pod: %v", err)
	}
	t.Cleanup(func() { _ = w.p.Delete(context.Background(), claimed) })
	return claimed
}

// A claim returns a running warm Pod, relabelled as the session's: the labels and
// annotations of the Pod the session would have had cold, plus the template's hash,
// under the session's NetworkPolicy (and no longer the pool's). The session's spec
// reaches process 1 at attach, and commands run there. The pool refills, and Delete
// removes the claimed Pod.
func TestPoolClaim(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := startPool(ctx, t, cs, 2)
	w.waitReady(ctx, t, 2)
	ns := w.cfg.Namespace
	before, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelWarm})
	if err != nil {
		t.Fatal(err)
	}
	s := w.claim(ctx, t, w.session(t))
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, s.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A claimer that listed the Pod before this claim (its copy's resourceVersion is
	// stale) is refused by the API server: the claim's precondition.
	found := false
	for _, stale := range before.Items {
		if stale.Name != s.Pod {
			continue
		}
		found = true
		stale.Labels[podspec.LabelSession] = "s-late"
		delete(stale.Labels, podspec.LabelWarm)
		if _, err := cs.CoreV1().Pods(ns).Update(ctx, &stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("a second claim from a stale copy = %v, want Conflict", err)
		}
	}
	if !found {
		t.Errorf("the claimed pod %s was not among the warm pods listed before", s.Pod)
	}
	cold, err := w.p.Compile(w.plan, s)
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(cold.Pod.Labels)
	want[podspec.LabelTemplate] = w.pool.Template()
	if !maps.Equal(pod.Labels, want) || !maps.Equal(pod.Annotations, cold.Pod.Annotations) {
		t.Errorf("the claimed pod: labels %v, annotations %v; want %v, %v", pod.Labels, pod.Annotations, want, cold.Pod.Annotations)
	}
	// The NetworkPolicies that select it: the session's, exactly as a cold start makes it.
	nps, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var selecting []string
	for _, np := range nps.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Matches(labels.Set(pod.Labels)) {
			selecting = append(selecting, np.Name)
			if np.Name == cold.NetworkPolicy.Name && !maps.Equal(np.Spec.PodSelector.MatchLabels, cold.NetworkPolicy.Spec.PodSelector.MatchLabels) {
				t.Errorf("the session's network policy selects %v, want %v", np.Spec.PodSelector, cold.NetworkPolicy.Spec.PodSelector)
			}
		}
	}
	if len(selecting) != 1 || selecting[0] != cold.NetworkPolicy.Name {
		t.Errorf("network policies selecting the claimed pod: %v, want only the session's %s", selecting, cold.NetworkPolicy.Name)
	}

	spec := podspec.InitSpec(w.plan, w.cfg, podEnv)
	ch, err := w.p.Attach(ctx, rc, s, spec)
	if err != nil {
		t.Fatalf("attaching to the claimed pod: %v%s", err, describe(ctx, cs, ns, s.Pod))
	}
	defer ch.Close()
	r := &runner{t: t, ch: ch, dir: w.plan.Workspace}
	if code, stdout, _ := r.run("", "/bin/sh", "-c", "echo $CORDON_TEST; touch probe && echo written"); code != 0 || stdout != "1\nwritten\n" {
		t.Errorf("a command in the claimed pod: status %d, stdout %q", code, stdout)
	}

	// The pool refills: two warm pods again besides the claimed one.
	w.waitReady(ctx, t, 2)
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelWarm})
	if err != nil || len(list.Items) != 2 {
		t.Errorf("warm pods after the refill: %d (%v), want 2", len(list.Items), err)
	}

	ch.Close()
	if err := w.p.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(ctx, cs, ns, s.Pod); err != nil {
		t.Errorf("the claimed pod after Delete: %v", err)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, cold.NetworkPolicy.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the session's network policy after Delete: %v, want NotFound", err)
	}
}

// Concurrent claims never get the same Pod: of many claimers racing for three
// ready Pods, each Pod goes to one, labelled as that claimer's session; the others
// are told no warm Pod is ready.
func TestPoolConcurrentClaims(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ready, claimers = 3, 8
	w := startPool(ctx, t, cs, ready)
	w.waitReady(ctx, t, ready)
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		byPod  = map[string][]string{} // pod -> the sessions that claimed it
		misses int
		errs   []error
	)
	start := make(chan struct{})
	for range claimers {
		s := w.session(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			claimed, err := w.pool.Claim(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				byPod[claimed.Pod] = append(byPod[claimed.Pod], claimed.ID)
				t.Cleanup(func() { _ = w.p.Delete(context.Background(), claimed) })
			case errors.Is(err, placement.ErrNoWarmPod):
				misses++
			default:
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Logf("%d claimers: %d pods claimed, %d told none was ready", claimers, len(byPod), misses)
	if err := errors.Join(errs...); err != nil {
		t.Errorf("claims failed: %v", err)
	}
	if len(byPod) < ready || len(byPod)+misses != claimers {
		t.Errorf("%d pods claimed and %d misses of %d claims; want every ready pod claimed, every other claim a miss", len(byPod), misses, claimers)
	}
	for pod, sessions := range byPod {
		if len(sessions) != 1 {
			t.Errorf("pod %s was claimed by %d sessions: %v", pod, len(sessions), sessions)
			continue
		}
		got, err := cs.CoreV1().Pods(w.cfg.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || got.Labels[podspec.LabelSession] != sessions[0] {
			t.Errorf("pod %s is labelled %v (%v), want session %s's", pod, got.Labels, err, sessions[0])
		}
	}
}

// A claim when no warm Pod is ready fails at once with ErrNoWarmPod, and the
// session starts cold instead.
func TestPoolEmptyFallsBack(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := startPool(ctx, t, cs, 1)
	s := w.session(t)
	began := time.Now()
	_, err := w.pool.Claim(ctx, s)
	took := time.Since(began)
	if !errors.Is(err, placement.ErrNoWarmPod) {
		t.Fatalf("a claim before any warm pod runs = %v, want ErrNoWarmPod", err)
	}
	if took > 5*time.Second {
		t.Errorf("the failed claim took %s: it must not wait for a pod", took)
	}
	t.Logf("the claim failed in %s: %v", took.Round(time.Millisecond), err)
	if _, err := cs.NetworkingV1().NetworkPolicies(w.cfg.Namespace).Get(ctx, podspec.Name(s.ID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the failed claim left the session's network policy: %v", err)
	}
	// Cold.
	objs, err := w.p.Compile(w.plan, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.p.Create(ctx, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.p.Delete(context.Background(), s) })
	if err := waitRunning(ctx, cs, w.cfg.Namespace, s.PodName()); err != nil {
		t.Fatal(err)
	}
	ch, err := w.p.Attach(ctx, rc, s, podspec.InitSpec(w.plan, w.cfg, podEnv))
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	r := &runner{t: t, ch: ch, dir: w.plan.Workspace}
	if code, stdout, _ := r.run("", "/bin/echo", "cold"); code != 0 || stdout != "cold\n" {
		t.Errorf("a command in the cold pod: status %d, stdout %q", code, stdout)
	}
}

// Close deletes every warm Pod and the pool's NetworkPolicy, even under a cancelled
// context, and leaves a claimed Pod to its session.
func TestPoolClose(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := startPool(ctx, t, cs, 2)
	w.waitReady(ctx, t, 2)
	s := w.claim(ctx, t, w.session(t))
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := w.pool.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ns := w.cfg.Namespace
	// A refill may still have been starting: Close waited for its creation.
	for {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, p := range list.Items {
			if p.Name != s.Pod && p.DeletionTimestamp == nil {
				left = append(left, p.Name)
			}
		}
		if len(left) != 0 {
			t.Fatalf("after Close: pods %v left besides the claimed %s", left, s.Pod)
		}
		if len(list.Items) == 1 && list.Items[0].Name == s.Pod {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after Close: %d pods, want the claimed one only", len(list.Items))
		case <-time.After(200 * time.Millisecond):
		}
	}
	nps, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(nps.Items) != 1 || nps.Items[0].Name != podspec.Name(s.ID) {
		t.Errorf("after Close: network policies %v (%v), want the session's only", nps.Items, err)
	}
	if pod, err := cs.CoreV1().Pods(ns).Get(ctx, s.Pod, metav1.GetOptions{}); err != nil || pod.DeletionTimestamp != nil {
		t.Errorf("the claimed pod after Close: %v (%v)%s", pod.DeletionTimestamp, err, describe(ctx, cs, ns, s.Pod))
	}
}

// waitGone waits until the pod no longer exists.
func waitGone(ctx context.Context, cs *kubernetes.Clientset, ns, name string) error {
	for {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A warm Pod is retired at MaxAge, before process 1 stops waiting for its attach,
// and replaced; the replacement can be claimed.
func TestPoolRetires(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	w := warmPool{plan: testPlan(t, image), cfg: podspec.Config{Namespace: ns, InitImage: image, NodeName: node, UID: testUID, GID: testUID}}
	var err error
	if w.p, err = placement.New(cs, w.cfg); err != nil {
		t.Fatal(err)
	}
	const maxAge = 15 * time.Second
	if w.pool, err = w.p.NewPool(ctx, w.plan, "acme", placement.PoolConfig{Size: 1, MaxAge: maxAge}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.pool.Close(context.Background()) })
	w.waitReady(ctx, t, 1)
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelWarm})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("warm pods: %d (%v), want 1", len(list.Items), err)
	}
	first := list.Items[0]
	if err := waitGone(ctx, cs, ns, first.Name); err != nil {
		t.Fatalf("the first warm pod was not retired: %v", err)
	}
	retired := time.Since(first.CreationTimestamp.Time)
	t.Logf("retired %s after its creation (MaxAge %s)", retired.Round(time.Second), maxAge)
	if retired < maxAge-time.Second { // creationTimestamp has a second's resolution
		t.Errorf("retired after %s, before MaxAge %s", retired, maxAge)
	}
	w.waitReady(ctx, t, 1)
	s := w.claim(ctx, t, w.session(t))
	if s.Pod == first.Name {
		t.Errorf("claimed the retired pod %s", s.Pod)
	}
}
