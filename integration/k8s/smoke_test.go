//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cordonhq/cordon/integration/k8stest"
)

const defaultKubeconfig = k8stest.DefaultKubeconfig

// client returns a clientset for the test cluster, skipping (failing under CI=true)
// when there is no kubeconfig.
func client(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, _ := clientConfig(t)
	return cs
}

// clientConfig is [client] and the REST config it was made from (for the exec API).
func clientConfig(t *testing.T) (*kubernetes.Clientset, *rest.Config) { return k8stest.ClientConfig(t) }

// testImage is the busybox test image scripts/container-env.sh builds and
// scripts/k8s-env.sh imports into containerd's k8s.io namespace.
func testImage() string {
	if img := os.Getenv("CORDON_TEST_IMAGE"); img != "" {
		return img
	}
	return "cordon-test/busybox:1"
}

// namespace makes a fresh namespace with its default ServiceAccount (the test cluster
// runs no controller-manager to make it) and returns its name and the node to bind Pods
// to (it runs no scheduler either). Its Pods are deleted at the end of the test.
func namespace(ctx context.Context, t *testing.T, cs *kubernetes.Clientset) (string, string) {
	t.Helper()
	return namespaceWith(ctx, t, cs, nil)
}

// namespaceWith is [k8stest.NamespaceWith].
func namespaceWith(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, labels map[string]string) (string, string) {
	return k8stest.NamespaceWith(ctx, t, cs, labels)
}

// lockedPod is a Pod in the posture cordon's sessions will have: a non-root uid, all
// capabilities dropped, no privilege escalation, a read-only root file system, the
// local image only.
func lockedPod(node string, script string) *corev1.Pod {
	uid := int64(1000)
	yes, no := true, false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-"},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:    &uid,
				RunAsGroup:   &uid,
				RunAsNonRoot: &yes,
			},
			Containers: []corev1.Container{{
				Name:            "probe",
				Image:           testImage(),
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/bin/sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                &uid,
					RunAsNonRoot:             &yes,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// postureScript exits 0 only when the container sees the posture lockedPod asks for,
// so the Pod's phase alone says whether the runtime applied it.
const postureScript = `set -e
test "$(id -u)" = 1000
if touch /probe 2>/dev/null; then echo "root file system is writable"; exit 3; fi
grep -q '^CapEff:[[:space:]]*0000000000000000$' /proc/self/status
grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status
echo posture-ok`

// A Pod in the locked-down posture runs to completion on the node, and inside it the
// uid, the read-only root, the empty capability set and no_new_privs hold.
func TestSmokeLockedPodSucceeds(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, node := namespace(ctx, t, cs)
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, lockedPod(node, postureScript), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the pod: %v", err)
	}
	phase, err := waitFinished(ctx, cs, ns, pod.Name)
	if err != nil {
		t.Fatalf("pod %s/%s: %v%s", ns, pod.Name, err, describe(ctx, cs, ns, pod.Name))
	}
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod %s/%s ended %s, want Succeeded%s", ns, pod.Name, phase, describe(ctx, cs, ns, pod.Name))
	}
	// The API server reaches the kubelet for the log (its address is the node's
	// InternalIP, on the test cluster's dummy interface).
	out, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the pod's log through the API server: %v", err)
	}
	if !bytes.Contains(out, []byte("posture-ok")) {
		t.Fatalf("pod log = %q, want posture-ok", out)
	}
}

// A Pod naming a RuntimeClass the cluster does not have is refused when it is created,
// not left pending or run with the default runtime.
func TestSmokeMissingRuntimeClassRefused(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, node := namespace(ctx, t, cs)
	pod := lockedPod(node, "true")
	pod.Name = "missing-runtime"
	class := "cordon-no-such-runtime"
	pod.Spec.RuntimeClassName = &class
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		t.Fatalf("a pod with runtimeClassName %q was admitted", class)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), class) {
		t.Fatalf("creating the pod: %v, want Forbidden naming RuntimeClass %q", err, class)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the refusal, getting the pod: %v, want NotFound", err)
	}
}

// waitFinished watches the pod until it has Succeeded or Failed.
func waitFinished(ctx context.Context, cs *kubernetes.Clientset, ns, name string) (corev1.PodPhase, error) {
	var phase corev1.PodPhase
	err := watchPod(ctx, cs, ns, name, "the pod finished", nil, func(p *corev1.Pod) (bool, error) {
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	return phase, err
}

// watchPod watches pod ns/name, runs start (when set) once the watch is open, and
// hands each state of the pod to until, until it says done or fails; what names the
// awaited event in errors. A watch the API server or the client's timeout ends is
// opened again (its first events are the pod's state then), until ctx ends: on a busy
// machine a Pod may take longer to start than one request may last.
func watchPod(ctx context.Context, cs *kubernetes.Clientset, ns, name, what string, start func() error, until func(*corev1.Pod) (bool, error)) error {
	for {
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting until %s: %w", what, ctx.Err())
			}
			return fmt.Errorf("watching: %w", err)
		}
		if start != nil {
			err, start = start(), nil
			if err != nil {
				w.Stop()
				return err
			}
		}
		opened := time.Now()
		done, err := watchEvents(ctx, w, what, until)
		w.Stop()
		if done || err != nil {
			return err
		}
		if time.Since(opened) < time.Second { // not a tight loop on a watch refused at once
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// watchEvents hands the pods of w's events to until; it returns false with no error
// when the watch ended first.
func watchEvents(ctx context.Context, w watch.Interface, what string, until func(*corev1.Pod) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("waiting until %s: %w", what, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if done, err := until(p); err != nil || done {
				return true, err
			}
		}
	}
}

// describe is the pod's status and events, for a failure message.
func describe(ctx context.Context, cs *kubernetes.Clientset, ns, name string) string {
	var b strings.Builder
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "\nphase %s, reason %q, message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "\ncontainer %s: %+v", c.Name, c.State)
		}
	}
	if evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			fmt.Fprintf(&b, "\nevent %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}
	return b.String()
}
