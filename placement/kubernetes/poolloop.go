package kubernetes

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// loop keeps the pool full until ctx ends: at each tick, and at once after a claim.
func (pl *Pool) loop(ctx context.Context) {
	defer close(pl.done)
	t := time.NewTicker(poolInterval)
	defer t.Stop()
	for {
		pl.fill(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-pl.kick:
		}
	}
}

// fill retires the warm Pods that ended, did not start in time or are too old to be
// claimed, and starts new ones until the pool holds Size, at most Starts of them
// starting at once. It never holds more than Size: a creation in flight is counted
// before the list, so a Pod it makes is counted once or twice, never not at all.
func (pl *Pool) fill(ctx context.Context) {
	inFlight := int(pl.creating.Load())
	list, err := pl.p.client.CoreV1().Pods(pl.p.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: pl.selector()})
	if err != nil {
		if ctx.Err() == nil {
			pl.cfg.Logger.Warn("warm pool: listing pods", logTemplate, pl.hash, logErr, err)
		}
		return
	}
	now := pl.now()
	kept, starting := inFlight, inFlight
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.DeletionTimestamp != nil {
			continue // going
		}
		age := now.Sub(pod.CreationTimestamp.Time)
		reason := ""
		switch {
		case ended(pod):
			reason = "ended"
		case age >= pl.cfg.MaxAge:
			reason = "too old to be claimed"
		case !running(pod) && age >= warmStartTimeout:
			reason = "did not start in time"
		case running(pod):
			kept++
			continue
		default:
			kept++
			starting++
			continue
		}
		pl.retire(ctx, pod, reason)
	}
	if pl.backingOff(now) {
		return
	}
	for ; kept < pl.cfg.Size && starting < pl.cfg.Starts; kept, starting = kept+1, starting+1 {
		pl.creating.Add(1)
		pl.creates.Add(1)
		go pl.create(ctx)
	}
}

// retire deletes a warm Pod the pool will not offer, unless it was claimed since.
func (pl *Pool) retire(ctx context.Context, pod *corev1.Pod, reason string) {
	pl.cfg.Logger.Info("warm pool: retiring a pod", logPod, pod.Name, logTemplate, pl.hash, logReason, reason)
	if err := pl.deletePod(ctx, pod); err != nil && ctx.Err() == nil {
		pl.cfg.Logger.Warn("warm pool: retiring a pod", logPod, pod.Name, logTemplate, pl.hash, logErr, err)
	}
}

// create creates one warm Pod. It survives the pool's end (bounded), so that Close,
// which waits for it, finds the Pod it may have made.
func (pl *Pool) create(ctx context.Context) {
	defer pl.creates.Done()
	defer pl.creating.Add(-1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	suffix, err := randomHex(3)
	if err != nil {
		pl.cfg.Logger.Warn("warm pool: creating a pod", logTemplate, pl.hash, logErr, err)
		return
	}
	pod := pl.pod.DeepCopy()
	pod.Name = pl.name() + "-" + suffix
	_, err = pl.p.client.CoreV1().Pods(pl.p.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	pl.failMu.Lock()
	if err != nil {
		pl.failures++
		pl.failedAt = pl.now()
	} else {
		pl.failures = 0
	}
	pl.failMu.Unlock()
	if err != nil {
		pl.cfg.Logger.Warn("warm pool: creating a pod", logPod, pod.Name, logTemplate, pl.hash, logErr, err)
		return
	}
	pl.cfg.Logger.Debug("warm pool: created a pod", logPod, pod.Name, logTemplate, pl.hash)
}

// backingOff says creations failed lately: the next wait 2 s after the last failure,
// doubled by each failure in a row, at most maxCreateBackoff. A cluster refusing the
// Pods (a quota, admission) is not asked again every tick.
func (pl *Pool) backingOff(now time.Time) bool {
	pl.failMu.Lock()
	defer pl.failMu.Unlock()
	if pl.failures == 0 {
		return false
	}
	wait := maxCreateBackoff
	if pl.failures < 6 {
		wait = min(poolInterval<<(pl.failures-1), maxCreateBackoff)
	}
	return now.Sub(pl.failedAt) < wait
}
