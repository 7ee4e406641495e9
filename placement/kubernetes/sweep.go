package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// orphanPolicyAge is how old a session's NetworkPolicy without its Pod must be before
// a sweep removes it: Create makes the policy first, and its Pod a moment later.
const orphanPolicyAge = 5 * time.Minute

// Sweep removes what sessions of tenant left on the cluster (warm Pods are their
// pool's, and left alone): a session Pod whose sandbox container ended (its process 1
// exited, so its session is over, whatever its cordon believes), one whose owner
// annotation gone reports gone (its cordon was killed), and a session NetworkPolicy
// whose Pod is gone and that is older than a few minutes. It returns the sessions
// whose objects it removed. It survives the caller's cancellation once it deletes.
func (p *Placement) Sweep(ctx context.Context, tenant string, gone func(owner string) bool) ([]string, error) {
	ns := p.cfg.Namespace
	sel := fmt.Sprintf("%s=%s,%s,!%s", podspec.LabelTenant, tenant, podspec.LabelSession, podspec.LabelWarm)
	pods, err := p.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the sessions' pods in %s: %w", ns, err)
	}
	var swept []string
	var errs []error
	live := map[string]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		id := pod.Labels[podspec.LabelSession]
		if !ended(pod) && !gone(pod.Annotations[podspec.AnnotationOwner]) {
			live[id] = true
			continue
		}
		if err := p.Delete(ctx, podspec.Session{Tenant: tenant, ID: id, Pod: pod.Name}); err != nil {
			errs = append(errs, err)
			live[id] = true
			continue
		}
		swept = append(swept, id)
	}
	nps, err := p.client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return swept, errors.Join(append(errs, fmt.Errorf("listing the sessions' network policies in %s: %w", ns, err))...)
	}
	for _, np := range nps.Items {
		id := np.Labels[podspec.LabelSession]
		if live[id] || time.Since(np.CreationTimestamp.Time) < orphanPolicyAge || np.Name != podspec.Name(id) {
			continue
		}
		// The Pod may have been made since the list: only a policy whose Pod is still
		// absent is removed.
		if _, err := p.client.CoreV1().Pods(ns).Get(ctx, podspec.Name(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			continue
		}
		if err := p.client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting network policy %s/%s: %w", ns, np.Name, err))
			continue
		}
		swept = append(swept, id)
	}
	return swept, errors.Join(errs...)
}
