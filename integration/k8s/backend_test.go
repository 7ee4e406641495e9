//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cordonhq/cordon/integration/k8stest"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/session/wire"
)

// backendEnv is the environment that places cordon's runs on the test cluster, in
// namespace ns on node, as tenant ([k8stest.BackendEnv]), with audit and run roots of
// the test's own.
func backendEnv(t *testing.T, ns, node, image, tenant string) []string {
	t.Helper()
	env := append(os.Environ(), k8stest.BackendEnv(t, ns, node, image, tenant)...)
	return append(env, "CORDON_AUDIT_DIR="+t.TempDir(), "CORDON_RUN_ROOT="+t.TempDir())
}

// cordonIn runs the cordon binary with env in dir and returns its status and output.
func cordonIn(ctx context.Context, t *testing.T, env []string, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, cordonBin(t), args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("cordon %s: %v", strings.Join(args, " "), err)
	}
	return 0, stdout.String(), stderr.String()
}

// `cordon run --backend kubernetes` and a `cordon session` on it, through the real
// binary: the command runs in a Pod of the tenant's namespace, as the config's uid,
// in an empty network namespace; the contract's one allowed server answers through
// the run's proxy on this host and a server it does not allow is refused, with the
// refusal in the run's log; a session's commands share the Pod; the Pod and its
// NetworkPolicy are gone when the run ends, and so they are when its command
// timed out.
func TestBackendKubernetes(t *testing.T) {
	cs, _ := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "allowed answer\n") }))
	defer allowed.Close()
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "denied answer\n") }))
	defer denied.Close()
	ap := netip.MustParseAddrPort(strings.TrimPrefix(allowed.URL, "http://"))

	ws := t.TempDir()
	data := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\nnetwork:\n  allow:\n    - cidr: 127.0.0.1/32\n      ports: [%d]\n      why: the test's server\nlimits: {memory: 256MiB, pids: 128, cpu: 0.1}\n", image, ap.Port())
	if err := os.WriteFile(filepath.Join(ws, "cordon.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	env := backendEnv(t, ns, node, image, "tenant-a")
	left := func(t *testing.T) {
		t.Helper()
		sel := podspec.LabelTenant + "=tenant-a"
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil || len(pods.Items) != 0 {
			t.Errorf("after the run: %d pods left (%v)", len(pods.Items), err)
		}
		nps, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil || len(nps.Items) != 0 {
			t.Errorf("after the run: %d network policies left (%v)", len(nps.Items), err)
		}
	}

	t.Run("run", func(t *testing.T) {
		script := fmt.Sprintf("id -u; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; wget -q -O - %s/; wget -q -O - %s/ || echo refused", allowed.URL, denied.URL)
		code, stdout, stderr := cordonIn(ctx, t, env, ws, "run", "--backend", "kubernetes", "--", "/bin/sh", "-c", script)
		lines := strings.Fields(stdout)
		if code != 0 || len(lines) < 4 || lines[0] != fmt.Sprint(testUID) || lines[1] != "lo" ||
			!strings.Contains(stdout, "allowed answer") || strings.Contains(stdout, "denied answer") || !strings.Contains(stdout, "refused") {
			t.Fatalf("cordon run --backend kubernetes: status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		left(t)
	})
	t.Run("workspace", func(t *testing.T) {
		// The host's workspace fills the Pod's before the command, and what the
		// command wrote comes back to the host (and into the log's diff) after it.
		if err := os.WriteFile(filepath.Join(ws, "input.txt"), []byte("from the host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := cordonIn(ctx, t, env, ws, "run", "--backend", "kubernetes", "--", "/bin/sh", "-c", "cat input.txt; echo made in the pod > output.txt; rm input.txt")
		if code != 0 || stdout != "from the host\n" {
			t.Fatalf("a command reading the host's file: status %d\n%s%s", code, stdout, stderr)
		}
		got, err := os.ReadFile(filepath.Join(ws, "output.txt"))
		if err != nil || string(got) != "made in the pod\n" {
			t.Errorf("the command's file on the host: %q, %v", got, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "input.txt")); err == nil {
			t.Error("the file the command removed is still on the host")
		}
		left(t)
	})
	t.Run("git trusts the workspace", func(t *testing.T) {
		// The Pod's copy of a repository belongs to a uid the commands do not map:
		// git works in it all the same, and its .git stays read-only.
		repo := t.TempDir()
		if err := os.WriteFile(filepath.Join(repo, "cordon.yaml"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		code, stdout, stderr := cordonIn(ctx, t, env, repo, "run", "--backend", "kubernetes", "--", "/bin/sh", "-c",
			"git rev-parse --is-inside-work-tree && git status --porcelain && (git config core.x y && echo wrote || echo refused)")
		if code != 0 || !strings.HasPrefix(stdout, "true\n") || !strings.Contains(stdout, "cordon.yaml") || !strings.HasSuffix(stdout, "refused\n") {
			t.Fatalf("git in the Pod's repository: status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		left(t)
	})
	t.Run("exit status and timeout", func(t *testing.T) {
		code, _, stderr := cordonIn(ctx, t, env, ws, "run", "--backend", "kubernetes", "--", "/bin/sh", "-c", "exit 7")
		if code != 7 {
			t.Errorf("exit 7 in the Pod: status %d\n%s", code, stderr)
		}
		code, _, stderr = cordonIn(ctx, t, env, ws, "run", "--backend", "kubernetes", "--timeout", "2s", "--", "/bin/sleep", "60")
		if code != 124 {
			t.Errorf("a command past its timeout: status %d, want 124\n%s", code, stderr)
		}
		left(t)
	})
	t.Run("host wins a conflict for good", func(t *testing.T) {
		// A file both changed keeps the host's version, at the sync that found the
		// conflict and at every later one, though the Pod still holds its own; and what
		// a background process wrote after the last command comes back at the stop.
		code, stdout, stderr := cordonIn(ctx, t, env, ws, "session", "start", "--backend", "kubernetes")
		if code != 0 {
			t.Fatalf("cordon session start: status %d\n%s%s", code, stdout, stderr)
		}
		sid := strings.TrimSpace(stdout)
		exec := func(script string) {
			t.Helper()
			if code, stdout, stderr := cordonIn(ctx, t, env, ws, "exec", sid, "--", "/bin/sh", "-c", script); code != 0 {
				t.Fatalf("cordon exec %q: status %d\n%s%s", script, code, stdout, stderr)
			}
		}
		exec("echo pod > both.txt")
		if err := os.WriteFile(filepath.Join(ws, "both.txt"), []byte("host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		exec("true")
		exec("true")
		// A background write after the last command ended reaches the host only
		// through the stop's own sync, before process 1 ends. Nothing on the host can
		// see the Pod's file meanwhile: the wait is a margin, 6 s for a 1 s sleep.
		exec("(sleep 1; echo late > late.txt) >/dev/null 2>&1 &")
		time.Sleep(6 * time.Second)
		if code, stdout, stderr := cordonIn(ctx, t, env, ws, "session", "stop", sid); code != 0 {
			t.Fatalf("cordon session stop: status %d\n%s%s", code, stdout, stderr)
		}
		if got, err := os.ReadFile(filepath.Join(ws, "both.txt")); err != nil || string(got) != "host\n" {
			t.Errorf("the file both changed, after two more syncs: %q %v, want the host's", got, err)
		}
		if got, err := os.ReadFile(filepath.Join(ws, "late.txt")); err != nil || string(got) != "late\n" {
			t.Errorf("the background write before the stop: %q %v, want it brought back by the stop", got, err)
		}
		left(t)
	})
	t.Run("session", func(t *testing.T) {
		code, stdout, stderr := cordonIn(ctx, t, env, ws, "session", "start", "--backend", "kubernetes")
		if code != 0 {
			t.Fatalf("cordon session start --backend kubernetes: status %d\n%s%s", code, stdout, stderr)
		}
		sid := strings.TrimSpace(stdout)
		defer cordonIn(ctx, t, env, ws, "session", "stop", sid)
		code, stdout, stderr = cordonIn(ctx, t, env, ws, "exec", sid, "--", "/bin/sh", "-c", "echo kept > /tmp/mark; hostname")
		if code != 0 {
			t.Fatalf("cordon exec: status %d\n%s%s", code, stdout, stderr)
		}
		pod := strings.TrimSpace(stdout)
		code, stdout, stderr = cordonIn(ctx, t, env, ws, "exec", sid, "--", "/bin/sh", "-c", "cat /tmp/mark; hostname; wget -q -O - "+allowed.URL+"/")
		if code != 0 || !strings.Contains(stdout, "kept\n"+pod+"\nallowed answer") {
			t.Fatalf("a session's second command: status %d, want the first's file, its Pod %s and the allowed server\n%s%s", code, pod, stdout, stderr)
		}
		code, _, stderr = cordonIn(ctx, t, env, ws, "exec", sid, "--", "/bin/sh", "-c", "exit 3")
		if code != 3 {
			t.Errorf("exit 3 in the session: status %d\n%s", code, stderr)
		}
		if code, stdout, stderr := cordonIn(ctx, t, env, ws, "session", "stop", sid); code != 0 {
			t.Fatalf("cordon session stop: status %d\n%s%s", code, stdout, stderr)
		}
		left(t)
	})
	t.Run("credentials", func(t *testing.T) {
		// Minted by cordon on this host for the run, delivered into the Pod (the
		// environment and /run/cordon/secrets, over the channel), never in the Pod
		// object, revoked when the run ends.
		cws := t.TempDir()
		data := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\ncredentials:\n  - {name: API_TOKEN, provider: local, ttl: 10m, scope: {scopes: [read]}, why: t}\n  - {name: FILE_TOKEN, provider: local, deliver: file, scope: {scopes: [write]}, why: t}\n", image)
		if err := os.WriteFile(filepath.Join(cws, "cordon.yaml"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		var objects strings.Builder
		script := "echo env=$API_TOKEN; echo file=$(cat /run/cordon/secrets/FILE_TOKEN); stat -c %a /run/cordon/secrets/FILE_TOKEN; sleep 2"
		done := make(chan struct{})
		go func() {
			defer close(done)
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelTenant + "=tenant-a"})
				if err == nil && len(pods.Items) > 0 {
					fmt.Fprintf(&objects, "%+v", pods.Items)
					return
				}
			}
		}()
		code, stdout, stderr := cordonIn(ctx, t, env, cws, "run", "--backend", "kubernetes", "--", "/bin/sh", "-c", script)
		<-done
		var envTok, fileTok string
		for _, l := range strings.Split(stdout, "\n") {
			if v, ok := strings.CutPrefix(l, "env="); ok {
				envTok = v
			}
			if v, ok := strings.CutPrefix(l, "file="); ok {
				fileTok = v
			}
		}
		if code != 0 || !strings.HasPrefix(envTok, "cordon_") || !strings.HasPrefix(fileTok, "cordon_") || !strings.Contains(stdout, "\n400\n") {
			t.Fatalf("credentials in the Pod: status %d\n%s%s", code, stdout, stderr)
		}
		if objects.Len() == 0 || strings.Contains(objects.String(), envTok) || strings.Contains(objects.String(), fileTok) {
			t.Errorf("the Pod object was not seen (%d bytes) or holds a token", objects.Len())
		}
		for _, tok := range []string{envTok, fileTok} {
			cmd := exec.CommandContext(ctx, cordonBin(t), "token", "verify", "-")
			cmd.Env, cmd.Stdin = env, strings.NewReader(tok+"\n")
			out, _ := cmd.CombinedOutput()
			if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "inactive") {
				t.Errorf("a token after its run: status %d, %s; want revoked (inactive)", cmd.ProcessState.ExitCode(), out)
			}
		}
		left(t)
	})
	t.Run("supervisor killed", func(t *testing.T) {
		// A session whose cordon is killed: its Pod's process 1 loses its control
		// stream and ends, and `cordon gc` removes the Pod and its policy; a live
		// session's Pod is left alone.
		code, stdout, stderr := cordonIn(ctx, t, env, ws, "session", "start", "--backend", "kubernetes")
		if code != 0 {
			t.Fatalf("cordon session start: status %d\n%s%s", code, stdout, stderr)
		}
		victim := strings.TrimSpace(stdout)
		// The live one in a workspace of its own: a workspace is one session's at a time.
		aliveWS := t.TempDir()
		if err := os.WriteFile(filepath.Join(aliveWS, "cordon.yaml"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr = cordonIn(ctx, t, env, aliveWS, "session", "start", "--backend", "kubernetes")
		if code != 0 {
			t.Fatalf("cordon session start: status %d\n%s%s", code, stdout, stderr)
		}
		alive := strings.TrimSpace(stdout)
		defer cordonIn(ctx, t, env, aliveWS, "session", "stop", alive)
		var root string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "CORDON_RUN_ROOT="); ok {
				root = v
			}
		}
		var pid int
		for _, si := range wire.List(paths.Root(root).Sessions()) {
			if si.ID == victim {
				pid = si.PID
			}
		}
		if pid == 0 {
			t.Fatalf("no record of session %s under %s", victim, root)
		}
		if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		podOf := func(id string) string { return podspec.Name(strings.ToLower(id)) }
		deadline := time.Now().Add(90 * time.Second)
		for {
			pod, err := cs.CoreV1().Pods(ns).Get(ctx, podOf(victim), metav1.GetOptions{})
			if err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the killed session's pod has not ended after 90s: %v %v", pod.Status.Phase, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
		code, stdout, stderr = cordonIn(ctx, t, env, ws, "gc")
		if code != 0 || !strings.Contains(stdout, strings.ToLower(victim)) {
			t.Errorf("cordon gc: status %d, want the killed session's pod removed\n%s%s", code, stdout, stderr)
		}
		if _, err := cs.CoreV1().Pods(ns).Get(ctx, podOf(victim), metav1.GetOptions{}); err == nil {
			t.Error("the killed session's pod is still there after cordon gc")
		}
		if _, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, podOf(victim), metav1.GetOptions{}); err == nil {
			t.Error("the killed session's network policy is still there after cordon gc")
		}
		if code, stdout, stderr := cordonIn(ctx, t, env, ws, "exec", alive, "--", "/bin/true"); code != 0 {
			t.Errorf("the live session after cordon gc: status %d\n%s%s", code, stdout, stderr)
		}
	})
}
