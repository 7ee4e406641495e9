package kubernetes

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakePool is a pool on a fake cluster whose Pods are stamped with the clock's time
// at their creation (the fake sets no creationTimestamp).
func fakePool(t *testing.T, cfg PoolConfig) (*fake.Clientset, *Pool, *fakeClock) {
	t.Helper()
	cs := fake.NewClientset()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		pod.CreationTimestamp = metav1.NewTime(clock.now())
		return false, nil, nil
	})
	p, err := New(cs, config(""))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := p.newPool(context.Background(), plan(), "acme", cfg, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close(context.Background()) })
	return cs, pl, clock
}

// warmPods waits (10 s at most) until the pool's warm Pods, not being deleted, are
// n, and returns them.
func warmPods(t *testing.T, cs *fake.Clientset, pl *Pool, n int) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := cs.CoreV1().Pods("acme").List(context.Background(), metav1.ListOptions{LabelSelector: pl.selector()})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == n {
			return list.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d warm pods, want %d", len(list.Items), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setRunning marks the Pods' sandbox containers running, as the kubelet would.
func setRunning(t *testing.T, cs *fake.Clientset, pods []corev1.Pod) {
	t.Helper()
	for _, pod := range pods {
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: podspec.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}}
		if _, err := cs.CoreV1().Pods("acme").UpdateStatus(context.Background(), &pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// The pool fills itself with warm Pods of the template, under a NetworkPolicy of its
// own; a claim takes a running one, relabels it as the session's under the
// session's NetworkPolicy, and the pool refills.
func TestPoolClaim(t *testing.T) {
	cs, pl, _ := fakePool(t, PoolConfig{Size: 2})
	pods := warmPods(t, cs, pl, 2)
	for _, pod := range pods {
		if !strings.HasPrefix(pod.Name, "cordon-warm-"+pl.id+"-") || pod.Labels[podspec.LabelTemplate] != pl.hash || pod.Labels[podspec.LabelSession] != "" {
			t.Errorf("warm pod %s labelled %v", pod.Name, pod.Labels)
		}
	}
	np, err := cs.NetworkingV1().NetworkPolicies("acme").Get(context.Background(), pl.name(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pool's network policy: %v", err)
	}
	sel, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if !sel.Matches(labels.Set(pods[0].Labels)) || len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("the pool's network policy %v does not deny the warm pods %v", np.Spec, pods[0].Labels)
	}

	// Starting, not running: nothing to claim, nothing changed.
	if _, err := pl.Claim(context.Background(), session); !errors.Is(err, ErrNoWarmPod) {
		t.Fatalf("Claim with no pod running = %v, want ErrNoWarmPod", err)
	}
	if list, _ := cs.NetworkingV1().NetworkPolicies("acme").List(context.Background(), metav1.ListOptions{}); len(list.Items) != 1 {
		t.Fatalf("after a failed claim: %d network policies, want the pool's only", len(list.Items))
	}

	setRunning(t, cs, pods)
	s, err := pl.Claim(context.Background(), session)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if s.ID != session.ID || (s.Pod != pods[0].Name && s.Pod != pods[1].Name) {
		t.Fatalf("Claim = %+v, want the session naming a warm pod", s)
	}
	got, err := cs.CoreV1().Pods("acme").Get(context.Background(), s.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(session.Labels())
	want[podspec.LabelTemplate] = pl.hash
	if !maps.Equal(got.Labels, want) {
		t.Errorf("the claimed pod's labels = %v, want %v", got.Labels, want)
	}
	snp, err := cs.NetworkingV1().NetworkPolicies("acme").Get(context.Background(), podspec.Name(session.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the session's network policy: %v", err)
	}
	if sel, _ := metav1.LabelSelectorAsSelector(&snp.Spec.PodSelector); !sel.Matches(labels.Set(got.Labels)) {
		t.Errorf("the session's network policy does not select the claimed pod")
	}
	if psel, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); psel.Matches(labels.Set(got.Labels)) {
		t.Errorf("the pool's network policy still selects the claimed pod")
	}
	// The pool refills: two warm pods again, besides the claimed one.
	warmPods(t, cs, pl, 2)
	// Delete removes the claimed pod and the session's policy.
	if err := pl.p.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("acme").Get(context.Background(), s.Pod, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the claimed pod after Delete: %v, want NotFound", err)
	}
}

// Two claimers never take the same Pod: the claim is an update conditioned on the
// Pod's resourceVersion, and a claimer whose update conflicts takes the next Pod.
// When every update conflicts, the claim fails with ErrNoWarmPod and leaves no
// NetworkPolicy of the session's.
func TestPoolClaimConflict(t *testing.T) {
	cs, pl, clock := fakePool(t, PoolConfig{Size: 2, Starts: 1})
	first := warmPods(t, cs, pl, 1)
	clock.add(time.Second)
	setRunning(t, cs, first)
	pods := warmPods(t, cs, pl, 2)
	setRunning(t, cs, pods)
	var conflicts int
	var mu sync.Mutex
	all := false
	cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if a.GetSubresource() != "" || (conflicts > 0 && !all) {
			return false, nil, nil
		}
		conflicts++
		pod := a.(k8stesting.UpdateAction).GetObject().(*corev1.Pod)
		return true, nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name, errors.New("the object has been modified"))
	})
	s, err := pl.Claim(context.Background(), session)
	if err != nil {
		t.Fatalf("Claim after one conflict: %v", err)
	}
	// The oldest pod is tried first; it conflicted, so the other is taken.
	if s.Pod == first[0].Name || conflicts != 1 {
		t.Errorf("Claim took %s after %d conflicts; want the other pod after the oldest's conflict", s.Pod, conflicts)
	}
	// Every update conflicting: no pod, and the session's policy is gone again.
	mu.Lock()
	all = true
	mu.Unlock()
	other := podspec.Session{Tenant: "acme", ID: "s-2"}
	if _, err := pl.Claim(context.Background(), other); !errors.Is(err, ErrNoWarmPod) {
		t.Fatalf("Claim with every update conflicting = %v, want ErrNoWarmPod", err)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("acme").Get(context.Background(), podspec.Name(other.ID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the failed claim's network policy: %v, want NotFound", err)
	}
}

// A warm Pod is retired (deleted, and replaced) before process 1 stops waiting for
// its attach, and is not claimed once too old.
func TestPoolRetires(t *testing.T) {
	cs, pl, clock := fakePool(t, PoolConfig{Size: 1, MaxAge: time.Minute})
	old := warmPods(t, cs, pl, 1)
	setRunning(t, cs, old)
	clock.add(time.Minute)
	if _, err := pl.Claim(context.Background(), session); !errors.Is(err, ErrNoWarmPod) {
		t.Fatalf("Claim of a pod at MaxAge = %v, want ErrNoWarmPod", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := cs.CoreV1().Pods("acme").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 && list.Items[0].Name != old[0].Name {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods %v, want the old one replaced", list.Items)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close deletes the warm Pods and the pool's NetworkPolicy, not a claimed Pod, even
// under a cancelled context; the pool claims nothing more.
func TestPoolClose(t *testing.T) {
	cs, pl, _ := fakePool(t, PoolConfig{Size: 2})
	setRunning(t, cs, warmPods(t, cs, pl, 2))
	s, err := pl.Claim(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	warmPods(t, cs, pl, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pl.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	list, err := cs.CoreV1().Pods("acme").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != s.Pod {
		t.Fatalf("after Close: pods %v (%v), want the claimed one only", list.Items, err)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("acme").Get(context.Background(), pl.name(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pool's network policy after Close: %v, want NotFound", err)
	}
	if _, err := pl.Claim(context.Background(), podspec.Session{Tenant: "acme", ID: "s-3"}); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Claim after Close = %v, want ErrPoolClosed", err)
	}
	if err := pl.Close(context.Background()); err != nil {
		t.Errorf("Close again: %v", err)
	}
}

// A claim for another tenant's session is refused.
func TestPoolOtherTenant(t *testing.T) {
	_, pl, _ := fakePool(t, PoolConfig{Size: 1})
	if _, err := pl.Claim(context.Background(), podspec.Session{Tenant: "other", ID: "s-1"}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("Claim for another tenant = %v, want ErrInvalid", err)
	}
}

func TestPoolConfigBounds(t *testing.T) {
	p, err := New(fake.NewClientset(), config(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []PoolConfig{
		{Size: MaxPoolSize + 1}, {Size: -1}, {Size: 2, Starts: 3}, {MaxAge: MaxWarmAge + time.Second},
	} {
		if _, err := p.NewPool(context.Background(), plan(), "acme", cfg); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("NewPool(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}

// An update that fails for another reason than a conflict may have been applied all
// the same: the Pod, perhaps the session's now and nobody's, is deleted, the
// session's NetworkPolicy too, and the error is the API server's.
func TestPoolClaimUpdateFails(t *testing.T) {
	cs, pl, _ := fakePool(t, PoolConfig{Size: 1})
	pods := warmPods(t, cs, pl, 1)
	setRunning(t, cs, pods)
	cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewServerTimeout(corev1.Resource("pods"), "update", 1)
	})
	_, err := pl.Claim(context.Background(), session)
	if err == nil || errors.Is(err, ErrNoWarmPod) || !strings.Contains(err.Error(), "claiming pod") {
		t.Fatalf("Claim with a failing update = %v, want the API server's error", err)
	}
	if _, err := cs.CoreV1().Pods("acme").Get(context.Background(), pods[0].Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod whose update failed: %v, want it deleted", err)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("acme").Get(context.Background(), podspec.Name(session.ID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the session's network policy: %v, want NotFound", err)
	}
}

// The pool never holds more than Size Pods, nor more than Starts starting at once.
func TestPoolBounds(t *testing.T) {
	cs, pl, _ := fakePool(t, PoolConfig{Size: 3, Starts: 2})
	// The loop stopped, fill is driven by hand.
	pl.stop()
	<-pl.done
	pl.creates.Wait() // the loop's last creations, which the fake's reactors race with
	ctx := context.Background()
	fill := func() []corev1.Pod {
		pl.fill(ctx)
		pl.creates.Wait()
		list, err := cs.CoreV1().Pods("acme").List(ctx, metav1.ListOptions{LabelSelector: pl.selector()})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	var pods []corev1.Pod
	for range 3 {
		if pods = fill(); len(pods) != 2 {
			t.Fatalf("none running: %d pods, want Starts, 2", len(pods))
		}
	}
	setRunning(t, cs, pods[:1])
	for range 3 {
		if pods = fill(); len(pods) != 3 {
			t.Fatalf("one running: %d pods, want Size, 3", len(pods))
		}
	}
	setRunning(t, cs, pods)
	if pods = fill(); len(pods) != 3 {
		t.Fatalf("all running: %d pods, want Size, 3", len(pods))
	}
}

// Creations that fail hold the next ones back, longer with each failure, and a
// success ends the pause.
func TestPoolCreateBackoff(t *testing.T) {
	cs, pl, clock := fakePool(t, PoolConfig{Size: 1})
	pl.stop()
	<-pl.done
	pl.creates.Wait() // the loop's last creations, which the fake's reactors race with
	var mu sync.Mutex
	refuse, attempts := true, 0
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if refuse {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "x", errors.New("exceeded quota"))
		}
		return false, nil, nil
	})
	ctx := context.Background()
	fill := func() int {
		pl.fill(ctx)
		pl.creates.Wait()
		mu.Lock()
		defer mu.Unlock()
		return attempts
	}
	// The loop's first fill may have made a pod already: start from none.
	for _, pod := range warmPodsNow(t, cs, pl) {
		_ = cs.CoreV1().Pods("acme").Delete(ctx, pod.Name, metav1.DeleteOptions{})
	}
	if n := fill(); n != 1 {
		t.Fatalf("first fill: %d attempts, want 1", n)
	}
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{
		{time.Second, 1},     // 2 s after one failure: held back
		{time.Second, 2},     // 2 s: tried, failed again
		{3 * time.Second, 2}, // 4 s after two failures: held back
		{time.Second, 3},
	} {
		clock.add(step.advance)
		if n := fill(); n != step.want {
			t.Fatalf("after %s more: %d attempts, want %d", step.advance, n, step.want)
		}
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	clock.add(8 * time.Second)
	if n := fill(); n != 4 || len(warmPodsNow(t, cs, pl)) != 1 {
		t.Fatalf("once the cluster takes pods: %d attempts", n)
	}
	if pl.backingOff(clock.now()) {
		t.Errorf("still backing off after a success")
	}
}

// warmPodsNow lists the pool's warm Pods.
func warmPodsNow(t *testing.T, cs *fake.Clientset, pl *Pool) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods("acme").List(context.Background(), metav1.ListOptions{LabelSelector: pl.selector()})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}
