//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/integration/k8stest"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// restricted labels a namespace with the restricted Pod Security profile, as
// deploy/kubernetes does for every tenant namespace: the API server refuses a Pod
// there that is not non-root, capability-free, without privilege escalation and
// under a RuntimeDefault or Localhost seccomp profile.
var restricted = k8stest.Restricted

const testUID = k8stest.TestUID

// testPlan compiles a contract with an image in a fresh workspace, as the server
// would for a session: @system, the private tmpfs, the workspace, its protected
// paths, a hidden .env, limits.
func testPlan(t *testing.T, image string) *contract.Plan {
	t.Helper()
	ws := t.TempDir()
	file := filepath.Join(ws, "cordon.yaml")
	data := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\n  deny_write: [\".git\"]\n  deny_read: [\".env\"]\nlimits: {memory: 256MiB, pids: 128, cpu: 0.1}\n", image)
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := contract.Parse(file, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	h, err := contract.HostFromOS()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := contract.Compile(c, h)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func sessionID(t *testing.T) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

// The Pod the placement compiles from a real contract's plan passes the restricted
// Pod Security profile, runs cordon's binary as process 1, and inside it the uid,
// the read-only root, the empty capability sets, no_new_privs, a seccomp filter, the
// workspace's mounts and the missing service account token hold, as measured through
// the exec API.
func TestPlacementPodRuns(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	plan := testPlan(t, image)
	name := startSession(ctx, t, cs, plan, podspec.Config{Namespace: ns, InitImage: image, NodeName: node, UID: testUID, GID: testUID})
	ws := plan.Workspace
	// Read-only is read from the mount table (the topmost mount at each path), not
	// from a failed write, which the uid alone could explain.
	script := fmt.Sprintf(`set -e
mnt() { awk -v p="$1" '$5 == p { split($6, o, ","); m = o[1] } END { print m }' /proc/self/mountinfo; }
echo "uid=$(id -u) gid=$(id -g)"
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo "pid1=$(tr '\0' ' ' </proc/1/cmdline)"
echo "root=$(mnt /)"
echo "cordon=$(mnt /run/cordon)"
echo "workspace=$(mnt %[1]s)"
touch %[1]s/probe && echo "workspace=writable"
echo "git=$(mnt %[1]s/.git)"
echo "env=$(mnt %[1]s/.env)"
[ -z "$(ls -A %[1]s/.env)" ] && echo "env=empty"
echo "tmp=$(mnt /tmp)"
touch /tmp/probe && echo "tmp=writable"
[ -e /var/run/secrets/kubernetes.io/serviceaccount/token ] && echo "token=present" || echo "token=absent"
echo "hostname=$(hostname)"
echo "memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"`, ws)
	out, err := execIn(ctx, cs, rc, ns, name, podspec.ContainerName, []string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatalf("exec in the pod: %v\n%s", err, out)
	}
	t.Logf("measured inside the pod:\n%s", out)
	for _, want := range []string{
		fmt.Sprintf("uid=%d gid=%d", testUID, testUID),
		"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
		"pid1=/run/cordon/cordon internal init --pod /run/cordon-control/init.sock ",
		"root=ro\n", "cordon=ro\n", "workspace=rw\n", "workspace=writable\n", "git=ro\n",
		"env=ro\n", "env=empty\n", "tmp=rw\n", "tmp=writable\n", "token=absent\n", "hostname=cordon\n",
		"memory=268435456\n", // the contract's limits.memory, 256 MiB
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inside the pod: want %q in\n%s", want, out)
		}
	}
	// Process 1's own word, through the API server.
	logs, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: podspec.ContainerName}).DoRaw(ctx)
	if err != nil || !bytes.Contains(logs, []byte("process 1 waiting for cordon to attach")) {
		t.Errorf("pod log = %q (%v), want process 1's line", logs, err)
	}
	// Stopped with the Pod's grace period, process 1 ends at SIGTERM with status 0,
	// not at the SIGKILL that follows the grace period (137).
	if code, err := stopAndWait(ctx, cs, ns, name); err != nil || code != 0 {
		t.Errorf("stopping the pod: process 1 exited %d (%v), want 0 at SIGTERM", code, err)
	}
}

// stopAndWait deletes the pod with its own grace period and returns the exit status
// of its sandbox container, as the kubelet reports it before the pod is gone.
func stopAndWait(ctx context.Context, cs *kubernetes.Clientset, ns, name string) (int32, error) {
	code := int32(-1)
	err := watchPod(ctx, cs, ns, name, "the container ended", func() error {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting: %w", err)
		}
		return nil
	}, func(p *corev1.Pod) (bool, error) {
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == podspec.ContainerName && c.State.Terminated != nil {
				code = c.State.Terminated.ExitCode
				return true, nil
			}
		}
		return false, nil
	})
	return code, err
}

// startSession creates a session's objects for plan through the placement and waits
// until its Pod runs; they are deleted at the end of the test. It returns the Pod's
// name.
func startSession(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, plan *contract.Plan, cfg podspec.Config) string {
	t.Helper()
	_, s := startPlaced(ctx, t, cs, plan, cfg)
	return podspec.Name(s.ID)
}

// sessionSetup is what most Pod tests start from: a fresh namespace enforcing the
// restricted profile, the Pod image, a plan naming it, and the placement's config for
// the namespace's node, as the test uid.
func sessionSetup(ctx context.Context, t *testing.T, cs *kubernetes.Clientset) (string, *contract.Plan, podspec.Config) {
	t.Helper()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	return ns, testPlan(t, image), podspec.Config{Namespace: ns, InitImage: image, NodeName: node, UID: testUID, GID: testUID}
}

// startPlaced is startSession, returning the placement and the session.
func startPlaced(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, plan *contract.Plan, cfg podspec.Config) (*placement.Placement, podspec.Session) {
	t.Helper()
	p, err := placement.New(cs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := podspec.Session{Tenant: "acme", ID: sessionID(t)}
	objs, err := p.Compile(plan, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Create(ctx, objs); err != nil {
		t.Fatalf("creating the session's objects: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), s); err != nil {
			t.Errorf("deleting the session's objects: %v", err)
		}
	})
	name := podspec.Name(s.ID)
	if err := waitRunning(ctx, cs, cfg.Namespace, name); err != nil {
		t.Fatalf("pod %s/%s: %v%s", cfg.Namespace, name, err, describe(ctx, cs, cfg.Namespace, name))
	}
	return p, s
}

// A RuntimeClass the cluster has is the Pod's: one named for the test, whose handler
// is containerd's runc.
func TestPlacementRuntimeClass(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	class := "cordon-test-" + sessionID(t)
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating RuntimeClass %s: %v", class, err)
	}
	t.Cleanup(func() {
		if err := cs.NodeV1().RuntimeClasses().Delete(context.Background(), class, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting RuntimeClass %s: %v", class, err)
		}
	})
	image := podImage(t)
	name := startSession(ctx, t, cs, testPlan(t, image), podspec.Config{Namespace: ns, InitImage: image, NodeName: node, RuntimeClass: class})
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc := pod.Spec.RuntimeClassName; rc == nil || *rc != class {
		t.Errorf("the running pod's runtimeClassName = %v, want %s", rc, class)
	}
}

// A RuntimeClass the cluster does not have refuses the session loudly, before
// anything is created: no Pod, no NetworkPolicy.
func TestPlacementMissingRuntimeClass(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := "cordon-test/k8s-pod:never-run" // nothing runs: any name will do
	class := "cordon-no-such-runtime"
	p, err := placement.New(cs, podspec.Config{Namespace: ns, InitImage: image, NodeName: node, RuntimeClass: class})
	if err != nil {
		t.Fatal(err)
	}
	s := podspec.Session{Tenant: "acme", ID: sessionID(t)}
	objs, err := p.Compile(testPlan(t, image), s)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Create(ctx, objs)
	if !errors.Is(err, placement.ErrNoRuntimeClass) || !strings.Contains(err.Error(), class) {
		t.Fatalf("Create = %v, want ErrNoRuntimeClass naming %q", err, class)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("after the refusal: %d pods (%v), want none", len(pods.Items), err)
	}
	nps, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(nps.Items) != 0 {
		t.Errorf("after the refusal: %d network policies (%v), want none", len(nps.Items), err)
	}
}

// The restricted profile on the test namespaces is in force: a Pod without a seccomp
// profile (the smoke test's) is refused there, so the compiled Pod's admission says
// something.
func TestRestrictedNamespaceEnforced(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	_, err := cs.CoreV1().Pods(ns).Create(ctx, lockedPod(node, "true"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "seccompProfile") {
		t.Fatalf("creating a pod without a seccomp profile in a restricted namespace: %v, want Forbidden naming seccompProfile", err)
	}
}

// waitRunning watches the pod until its container runs (an error when it ends first).
func waitRunning(ctx context.Context, cs *kubernetes.Clientset, ns, name string) error {
	return watchPod(ctx, cs, ns, name, "the pod ran", nil, func(p *corev1.Pod) (bool, error) {
		switch p.Status.Phase {
		case corev1.PodSucceeded, corev1.PodFailed:
			return false, fmt.Errorf("the pod ended %s", p.Status.Phase)
		case corev1.PodRunning:
			for _, c := range p.Status.ContainerStatuses {
				if c.Name == podspec.ContainerName && c.State.Running != nil {
					return true, nil
				}
			}
		}
		return false, nil
	})
}

// execIn runs argv in the pod's container through the API server's exec API and
// returns its output (stdout and stderr).
func execIn(ctx context.Context, cs *kubernetes.Clientset, rc *rest.Config, ns, pod, ctr string, argv []string) (string, error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: ctr, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		return "", fmt.Errorf("exec: %w", err)
	}
	// One buffer for both streams, which the executor copies from two goroutines.
	out := &lockedBuffer{}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out, Stderr: out})
	return out.String(), err
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A hidden file outside the workspace that the image holds cannot be covered by the
// empty directory the placement mounts over hidden paths: the runtime refuses the
// container at its start, and the Pod never runs with the file shown.
func TestPlacementHiddenImageFile(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	plan := testPlan(t, image)
	plan.Mounts = append(plan.Mounts, contract.Mount{Path: "/cordon-init", Type: contract.Mask, Why: "filesystem.deny_read"})
	reason := createRefused(ctx, t, cs, podspec.Config{Namespace: ns, InitImage: image, NodeName: node}, plan)
	t.Logf("the runtime refused the container: %s", reason)
}

// createRefused places a session of plan with cfg and returns why the runtime
// refused its sandbox container; it fails the test when the container runs.
func createRefused(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, cfg podspec.Config, plan *contract.Plan) string {
	t.Helper()
	p, err := placement.New(cs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := podspec.Session{Tenant: "acme", ID: sessionID(t)}
	objs, err := p.Compile(plan, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Create(ctx, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), s) })
	name := podspec.Name(s.ID)
	reason, err := waitRefused(ctx, cs, cfg.Namespace, name)
	if err != nil {
		t.Fatalf("pod %s/%s: %v%s", cfg.Namespace, name, err, describe(ctx, cs, cfg.Namespace, name))
	}
	return reason
}

// waitRefused watches the pod until its sandbox container is refused (waiting with an
// error reason, or terminated without having run); an error when it runs.
func waitRefused(ctx context.Context, cs *kubernetes.Clientset, ns, name string) (string, error) {
	var reason string
	err := watchPod(ctx, cs, ns, name, "the refusal", nil, func(p *corev1.Pod) (bool, error) {
		for _, c := range p.Status.ContainerStatuses {
			if c.Name != podspec.ContainerName {
				continue
			}
			switch st := c.State; {
			case st.Running != nil:
				return false, errors.New("the container runs")
			case st.Waiting != nil && strings.Contains(st.Waiting.Reason, "Error"):
				reason = st.Waiting.Reason + ": " + st.Waiting.Message
				return true, nil
			case st.Terminated != nil:
				reason = st.Terminated.Reason + ": " + st.Terminated.Message
				return true, nil
			}
		}
		return false, nil
	})
	return reason, err
}
