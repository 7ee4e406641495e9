//go:build k8s

package k8s

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// kubeletSeccompDir is the test kubelet's seccomp directory (scripts/k8s/env-lib.sh:
// its --root-dir, then seccomp), where scripts/k8s-env.sh installs cordon's profile.
const kubeletSeccompDir = "/var/lib/cordon-k8s/kubelet/seccomp"

// nodeKubelet is the node's kubelet port (scripts/k8s-env.sh's node address).
const nodeKubelet = "198.18.0.1:10250"

// A command in the Pod runs in an empty network namespace: it sees loopback only, up
// (a listener on 127.0.0.1 answers), and connects neither to another Pod (which a
// plain exec in the same Pod, in the Pod's own network namespace, reaches: the
// comparison can fail) nor to the node's kubelet. The Pod runs under cordon's
// Localhost seccomp profile, which the namespace's restricted Pod Security admits.
func TestPodNetwork(t *testing.T) {
	if _, err := os.Stat(filepath.Join(kubeletSeccompDir, podspec.DefaultSeccompProfile)); err != nil {
		t.Fatalf("cordon's seccomp profile is not installed on the node (run scripts/k8s-env.sh): %v", err)
	}
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	other := otherPodIP(ctx, t, cs)
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	p, s := startPlaced(ctx, t, cs, plan, cfg)
	name := podspec.Name(s.ID)
	connect := fmt.Sprintf(`for a in %s %s:8080; do
  if nc -w 3 ${a%%:*} ${a##*:} </dev/null 2>/tmp/nc.err; then echo "$a=connected"; else echo "$a=failed: $(cat /tmp/nc.err)"; fi
done
`, nodeKubelet, other)

	// The baseline: a plain exec is in the Pod's network namespace.
	out, err := execIn(ctx, cs, rc, ns, name, podspec.ContainerName, []string{"/bin/sh", "-c", "cat /proc/net/dev; " + connect})
	t.Logf("a plain exec, in the Pod's network namespace:\n%s", out)
	if err != nil || !strings.Contains(out, "eth0:") || !strings.Contains(out, other+":8080=connected") {
		t.Fatalf("a plain exec: want eth0 and %s:8080 reached in %q (%v)", other, out, err)
	}

	ch, err := p.Attach(ctx, rc, s, podspec.InitSpec(plan, cfg, podEnv))
	if err != nil {
		t.Fatalf("attaching: %v%s", err, describe(ctx, cs, ns, name))
	}
	defer ch.Close()
	r := &runner{t: t, ch: ch, dir: plan.Workspace}
	// The client sends from a file, not a pipe: the listener's stdin is empty, so it
	// shuts its side at once, and busybox nc exits 0 on that end without sending
	// what a pipe's writer has not written yet (a loaded machine's race).
	script := `echo "interfaces=[$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')]"
ip -o link show lo
echo hi >/tmp/hi
nc -l -p 4242 >/tmp/lo.out &
for i in $(seq 50); do nc -w 1 127.0.0.1 4242 </tmp/hi 2>/dev/null && break; sleep 0.1; done
wait
echo "loopback=$(cat /tmp/lo.out)"
` + connect
	code, stdout, stderr := r.run("", "/bin/sh", "-c", script)
	t.Logf("a command through the channel (status %d):\n%s%s", code, stdout, stderr)
	for _, want := range []string{"interfaces=[lo ]\n", ",UP,", "loopback=hi\n", nodeKubelet + "=failed", other + ":8080=failed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("a command: want %q in\n%s", want, stdout)
		}
	}
	r.posture(podspec.InitSpec(plan, cfg, podEnv).Writable)

	// The inner init, seen from a plain exec: it holds no capability in any set
	// (it held two in its own user namespace until it brought lo up), with
	// no_new_privs, and is not dumpable (its status is readable, its fds are not).
	out, err = execIn(ctx, cs, rc, ns, name, podspec.ContainerName, []string{"/bin/sh", "-c", `for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' <$p/cmdline 2>/dev/null)" in
  "/run/cordon/cordon internal init --pod-inner "*)
    echo "inner=$p"; grep -E '^(Cap|NoNewPrivs)' $p/status; ls $p/fd >/dev/null 2>&1 && echo fd=readable || echo fd=denied ;;
  esac
done`})
	t.Logf("the inner init, from a plain exec:\n%s", out)
	for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "fd=denied"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("the inner init: want %q in %q (%v)", want, out, err)
		}
	}
	if n := strings.Count(out, "inner="); n != 1 {
		t.Errorf("found %d inner inits, want 1", n)
	}
}

// otherPodIP starts another Pod, in a namespace of its own (another tenant's), that
// serves on port 8080, and returns its IP once it runs.
func otherPodIP(ctx context.Context, t *testing.T, cs *kubernetes.Clientset) string {
	t.Helper()
	ns, node := namespace(ctx, t, cs)
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, lockedPod(node, "exec httpd -f -p 8080 -h /"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the other Pod: %v", err)
	}
	var ip string
	err = watchPod(ctx, cs, ns, pod.Name, "the other Pod runs", nil, func(p *corev1.Pod) (bool, error) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the other Pod ended %s", p.Status.Phase)
		}
		ip = p.Status.PodIP
		return p.Status.Phase == corev1.PodRunning && ip != "", nil
	})
	if err != nil {
		t.Fatalf("%v%s", err, describe(ctx, cs, ns, pod.Name))
	}
	return ip
}

// A node without the configured seccomp profile refuses the sandbox container when it
// creates it, naming the profile: the Pod never runs without it.
func TestPlacementMissingSeccompProfile(t *testing.T) {
	cs := client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	const missing = "cordon/no-such-profile.json"
	reason := createRefused(ctx, t, cs, podspec.Config{Namespace: ns, InitImage: image, NodeName: node, SeccompProfile: missing}, testPlan(t, image))
	t.Logf("refused: %s", reason)
	if !strings.Contains(reason, "no-such-profile.json") {
		t.Errorf("the refusal %q does not name the missing profile", reason)
	}
}
