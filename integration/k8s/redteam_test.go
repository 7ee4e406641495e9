//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// Red-team tests of the kubernetes backend: each names a break found by attacking it
// through the real binaries on the test cluster.

// redContract is a plain contract for the Pod test image.
func redContract(t *testing.T, image string) string {
	t.Helper()
	ws := t.TempDir()
	data := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\nlimits: {memory: 256MiB, pids: 128, cpu: 0.1}\n", image)
	if err := os.WriteFile(filepath.Join(ws, "cordon.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws
}

// supervisors are the pids of the processes whose environment names runRoot (the
// sessions' supervisors started with it).
func supervisors(t *testing.T, runRoot string) []int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, []byte("\x00CORDON_RUN_ROOT="+runRoot+"\x00")) && !bytes.HasPrefix(env, []byte("CORDON_RUN_ROOT="+runRoot+"\x00")) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(cmdline, []byte("supervise")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// envValue is name's value in env.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// tenantObjects counts the Pods and NetworkPolicies of tenant in ns.
func tenantObjects(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, ns, tenant string) (int, int) {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: podspec.LabelTenant + "=" + tenant}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	nps, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	return len(pods.Items), len(nps.Items)
}

// A session's supervisor killed with SIGKILL (out of memory, a crash) cannot tear its
// Pod down; `cordon gc`, which cordon serve runs on the tenant's run root as soon as it
// finds the session dead, must then remove what it left on the cluster as it removes
// a dead run's containers. It removes the run directory and seals the log, and leaves
// the session's Pod and its NetworkPolicy in the namespace.
func TestRedTeamDeadSupervisorLeavesObjects(t *testing.T) {
	cs, _ := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	ws := redContract(t, image)
	env := backendEnv(t, ns, node, image, "tenant-dead")
	code, stdout, stderr := cordonIn(ctx, t, env, ws, "session", "start", "--backend", "kubernetes")
	if code != 0 {
		t.Fatalf("cordon session start: status %d\n%s%s", code, stdout, stderr)
	}
	sid := strings.TrimSpace(stdout)
	pids := supervisors(t, envValue(env, "CORDON_RUN_ROOT"))
	if len(pids) != 1 {
		t.Fatalf("session %s: supervisors %v, want one", sid, pids)
	}
	if err := linux.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for linux.Kill(pids[0], 0) == nil {
		time.Sleep(100 * time.Millisecond)
	}
	code, stdout, stderr = cordonIn(ctx, t, env, ws, "gc")
	if code != 0 || !strings.Contains(stdout, "removed run "+sid) {
		t.Fatalf("cordon gc after the supervisor's death: status %d\n%s%s", code, stdout, stderr)
	}
	var pods, nps int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if pods, nps = tenantObjects(ctx, t, cs, ns, "tenant-dead"); pods+nps == 0 {
			return
		}
	}
	t.Errorf("session %s's supervisor died and cordon gc collected the run: %d pods and %d network policies of it left on the cluster, want none", sid, pods, nps)
}

// A Pod that never runs (no node takes it: here no nodeName on a cluster without a
// scheduler; on a real cluster, one too full for the contract's requests) must fail
// the session's start within a bound, and leave neither a supervisor nor the Pod.
// cordon serve kills `cordon session start` after two minutes, but the supervisor it
// started waits for the Pod without end, holding it Pending.
func TestRedTeamPendingPodBoundsStart(t *testing.T) {
	cs, _ := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	ws := redContract(t, image)
	env := backendEnv(t, ns, node, image, "tenant-pending")
	cfgFile := envValue(env, "CORDON_PLACEMENT_CONFIG")
	data, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	unbound := strings.Replace(string(data), "nodeName: "+node+"\n", "", 1)
	if err := os.WriteFile(cfgFile, []byte(unbound), 0o644); err != nil {
		t.Fatal(err)
	}
	runRoot := envValue(env, "CORDON_RUN_ROOT")
	t.Cleanup(func() {
		for _, pid := range supervisors(t, runRoot) {
			linux.Kill(pid, syscall.SIGTERM)
		}
	})
	const bound = 3 * time.Minute // what cordon serve gives a start (2 min), and some
	sctx, scancel := context.WithTimeout(ctx, bound)
	defer scancel()
	began := time.Now()
	code, stdout, stderr := cordonIn(sctx, t, env, ws, "session", "start", "--backend", "kubernetes")
	took := time.Since(began)
	if code == 0 {
		t.Fatalf("a session whose Pod never runs started: %s", stdout)
	}
	if sctx.Err() != nil {
		t.Errorf("cordon session start of a Pod that never runs was still waiting after %s (killed)", took.Round(time.Second))
	}
	deadline := time.Now().Add(45 * time.Second)
	for len(supervisors(t, runRoot)) > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	if pids := supervisors(t, runRoot); len(pids) > 0 {
		t.Errorf("after the start failed (status %d after %s): supervisors %v still running\n%s", code, took.Round(time.Second), pids, stderr)
	}
	if pods, nps := tenantObjects(ctx, t, cs, ns, "tenant-pending"); pods+nps != 0 {
		t.Errorf("after the start failed: %d pods and %d network policies left", pods, nps)
	}
}

// A command's fs.diff in the session's log must hold what the command changed: the
// Pod's workspace is its own volume, brought back to this host's after each command,
// so the file the command made is in its diff; and a file a host process writes into
// this host's workspace during the command is kept (the Pod never had it: the sync
// neither removes nor replaces it). That host file is logged in the command's diff
// too, as on the local backends, where the two cannot be told apart; for a Pod they
// could be (the sync knows what it changed), which is left to do (docs/kubernetes.md).
func TestRedTeamAuditDiffIsTheHosts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rs := redSession(ctx, t, "tenant-diff")
	env, ws, sid := rs.env, rs.ws, rs.sid
	planted := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second)
		planted <- os.WriteFile(filepath.Join(ws, "planted-on-host.txt"), []byte("not the command's\n"), 0o644)
	}()
	code, stdout, stderr := cordonIn(ctx, t, env, ws, "exec", sid, "--", "/bin/sh", "-c", "sleep 5; echo mine > made-in-pod.txt")
	if err := <-planted; err != nil || code != 0 {
		t.Fatalf("the command: status %d (%v)\n%s%s", code, err, stdout, stderr)
	}
	if code, stdout, stderr = cordonIn(ctx, t, env, ws, "session", "stop", sid); code != 0 {
		t.Fatalf("cordon session stop: status %d\n%s%s", code, stdout, stderr)
	}
	_, stdout, _ = cordonIn(ctx, t, env, ws, "audit", "show", sid)
	if !strings.Contains(stdout, "A made-in-pod.txt") {
		t.Errorf("the log records a diff for the command without the file it made:\n%s", stdout)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "planted-on-host.txt")); err != nil || string(data) != "not the command's\n" {
		t.Errorf("the host's own file after the Pod's workspace was brought back: %q, %v", data, err)
	}
}

// A command's timeout must end it whatever it does with its stdin. In a Pod, stdin
// frames are queued per stream (16 frames, then the relay stops reading the stream),
// so a command that leaves a large stdin unread holds the relay's reader: the
// runner's SIGKILL at the timeout waits behind the stdin frames and never arrives.
// cordon exec says 124, "killed with its process group", the command runs on until
// the session stops, and every later command of the session hangs.
func TestRedTeamTimeoutWithUnreadStdin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rs := redSession(ctx, t, "tenant-stdin")
	env, ws, sid := rs.env, rs.ws, rs.sid
	// 4 MB of stdin that /bin/sleep never reads.
	cmd := exec.CommandContext(ctx, cordonBin(t), "exec", "-i", "--timeout", "3s", sid, "--", "/bin/sleep", "6123")
	cmd.Dir, cmd.Env = ws, env
	cmd.Stdin = io.LimitReader(zeros{}, 4<<20)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 124 {
		t.Fatalf("a command past its timeout: %v, want status 124\n%s", err, out)
	}
	// The next command of the session runs, and sees no sleep left.
	ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
	defer ecancel()
	code, stdout, stderr := cordonIn(ectx, t, env, ws, "exec", sid, "--", "/bin/sh", "-c", "ps -o args | grep -c '^/bin/sleep 6123' || true")
	if ectx.Err() != nil {
		t.Fatalf("the session's next command after a timed-out one with unread stdin: still waiting after 30s (status %d)\n%s%s", code, stdout, stderr)
	}
	if code != 0 || strings.TrimSpace(stdout) != "0" {
		t.Errorf("after its timeout the command still runs in the Pod: status %d, %q sleeps\n%s", code, strings.TrimSpace(stdout), stderr)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// A command may write nothing on the node's disk outside the Pod's bounded volumes.
// The kubelet binds a file of the Pod's directory on the node at the container's
// terminationMessagePath (/dev/termination-log by default), and the Landlock ruleset
// grants commands write on /dev (for its device nodes): a command filled that file
// without bound (200 MB measured), past workspaceBytes and the memory limit, on the
// disk every tenant's Pods and the kubelet share.
func TestRedTeamTerminationLogBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rs := redSession(ctx, t, "tenant-termlog")
	cs, ns, env, ws, sid := rs.cs, rs.ns, rs.env, rs.ws, rs.sid
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelTenant + "=tenant-termlog"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the session's pod: %d (%v)", len(pods.Items), err)
	}
	pod := pods.Items[0]
	var paths []string
	for _, c := range pod.Spec.Containers {
		paths = append(paths, c.TerminationMessagePath)
	}
	script := ""
	for _, p := range append(paths, "/dev/termination-log") {
		script += fmt.Sprintf("head -c 8000000 /dev/zero > %s 2>/dev/null; ", p)
	}
	if code, stdout, stderr := cordonIn(ctx, t, env, ws, "exec", sid, "--", "/bin/sh", "-c", script+"true"); code != 0 {
		t.Fatalf("the command: status %d\n%s%s", code, stdout, stderr)
	}
	dir := filepath.Join(kubeletRoot, "pods", string(pod.UID), "containers")
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Size() > 4096 {
			os.Truncate(p, 0) // the test's own bytes, off the shared disk
			t.Errorf("a command wrote %d bytes to %s on the node (the container's termination message)", fi.Size(), p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// kubeletRoot is the test node's kubelet --root-dir.
const kubeletRoot = "/var/lib/cordon-k8s/kubelet"

// redRun is a red-team test's Pod session: the cluster's client, the session's
// namespace, the placing environment, the workspace and the session's id.
type redRun struct {
	cs      *kubernetes.Clientset
	ns      string
	env     []string
	ws, sid string
}

// redSession starts a Pod session of tenant in a fresh namespace on the red team's
// contract, stopped at the end of the test.
func redSession(ctx context.Context, t *testing.T, tenant string) redRun {
	t.Helper()
	cs, _ := clientConfig(t)
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	r := redRun{cs: cs, ns: ns, ws: redContract(t, image), env: backendEnv(t, ns, node, image, tenant)}
	code, stdout, stderr := cordonIn(ctx, t, r.env, r.ws, "session", "start", "--backend", "kubernetes")
	if code != 0 {
		t.Fatalf("cordon session start: status %d\n%s%s", code, stdout, stderr)
	}
	r.sid = strings.TrimSpace(stdout)
	t.Cleanup(func() { cordonIn(context.Background(), t, r.env, r.ws, "session", "stop", r.sid) })
	return r
}
