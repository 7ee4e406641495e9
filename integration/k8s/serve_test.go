//go:build k8s

package k8s

import (
	"bufio"
	"context"
	"encoding/json"
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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// servedCluster is a `cordon serve` whose tenant "acme" is placed on the test cluster
// and whose tenant "local" is not; uid 0 is an agent and auditor of both (the unix
// socket's peer credential).
type servedCluster struct {
	sock string
	env  []string // a client's: CORDON_HOST names the socket
	ns   string
	top  string
}

// serveCluster starts the real binary with acme placed in a fresh namespace.
func serveCluster(ctx context.Context, t *testing.T, contract, acme string) *servedCluster {
	t.Helper()
	cs, _ := clientConfig(t)
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	top, err := os.MkdirTemp("", "ck")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	etc := filepath.Join(top, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := os.Getenv("CORDON_K8S_KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = defaultKubeconfig
	}
	files := map[string]string{
		"placement.yaml": fmt.Sprintf("version: 1\nnamespace: %s\ninitImage: %s\nnodeName: %s\nuid: %d\ngid: %d\n", ns, image, node, testUID, testUID),
		"base.yaml":      contract,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "kubeconfig"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &servedCluster{sock: filepath.Join(top, "run", "cordon.sock"), ns: ns, top: top}
	cfg := fmt.Sprintf(`version: 1
listen:
  unix: {path: %s}
tenants:
  - name: acme
    root: %s
    base_contract: %s
    placement:
      kubernetes: {config: %s, kubeconfig: %s}
    credentials:
      - {name: root, roles: [agent, auditor], uid: 0}
%s`, s.sock, filepath.Join(top, "acme"), filepath.Join(etc, "base.yaml"), filepath.Join(etc, "placement.yaml"), filepath.Join(etc, "kubeconfig"), acme)
	file := filepath.Join(etc, "serve.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cordonBin(t), "serve", "--config", file)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, done := make(chan bool, 1), make(chan struct{})
	var log strings.Builder
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			var line struct{ Msg, Listener string }
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Listener == "unix" {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("cordon serve's log:\n%s", log.String())
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			<-done
			t.Fatalf("cordon serve exited before listening:\n%s", log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cordon serve is not listening after 30s")
	}
	s.env = append(os.Environ(), "CORDON_HOST=unix://"+s.sock)
	return s
}

// `cordon serve` with a tenant placed on the cluster, through the real binary and its
// real client: a session started through the API runs its commands in a Pod of the
// tenant's namespace (the tenant's Pods, labelled with its name), with the contract's
// allowlist deciding on the server's proxy; the session's log is in the tenant's
// audit root on the server, and is read through the API, commands and egress
// included; a client cannot ask a placed tenant's session onto a local backend; the
// Pod is gone when the session is stopped.
func TestServeKubernetesPlacement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "allowed answer\n") }))
	defer allowed.Close()
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "denied answer\n") }))
	defer denied.Close()
	ap := netip.MustParseAddrPort(strings.TrimPrefix(allowed.URL, "http://"))
	contract := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\nnetwork:\n  allow:\n    - cidr: 127.0.0.1/32\n      ports: [%d]\n      why: the test's server\nlimits: {memory: 256MiB, pids: 128, cpu: 0.1}\n", podImage(t), ap.Port())
	s := serveCluster(ctx, t, contract, "")
	cs, _ := clientConfig(t)
	dir := t.TempDir()
	cfile := filepath.Join(dir, "cordon.yaml")
	if err := os.WriteFile(cfile, []byte(contract), 0o644); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := cordonIn(ctx, t, s.env, dir, "session", "start", "-c", cfile, "--backend", "bwrap")
	if code == 0 || !strings.Contains(stderr, "placed on kubernetes") {
		t.Errorf("a placed tenant's session asked onto bwrap: status %d, want a refusal naming the placement\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = cordonIn(ctx, t, s.env, dir, "session", "start", "-c", cfile)
	if code != 0 {
		t.Fatalf("cordon session start through the server: status %d\n%s%s", code, stdout, stderr)
	}
	sid := strings.TrimSpace(stdout)
	pods, err := cs.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelTenant + "=acme"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the tenant's pods while its session runs: %d (%v), want 1", len(pods.Items), err)
	}
	script := fmt.Sprintf("id -u; wget -q -O - %s/; wget -q -O - %s/ || echo refused", allowed.URL, denied.URL)
	code, stdout, stderr = cordonIn(ctx, t, s.env, dir, "exec", sid, "--", "/bin/sh", "-c", script)
	if code != 0 || !strings.HasPrefix(stdout, fmt.Sprintf("%d\nallowed answer\n", testUID)) || !strings.Contains(stdout, "refused") || strings.Contains(stdout, "denied answer") {
		t.Fatalf("cordon exec through the server: status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr = cordonIn(ctx, t, s.env, dir, "session", "stop", sid); code != 0 {
		t.Fatalf("cordon session stop: status %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = cordonIn(ctx, t, s.env, dir, "audit", "show", sid)
	dp := strings.TrimPrefix(denied.URL, "http://")
	if code != 0 || !strings.Contains(stdout, "backend kubernetes") || !strings.Contains(stdout, "$ /bin/sh -c \"id -u; wget") ||
		!strings.Contains(stdout, "allow  "+ap.String()) || !strings.Contains(stdout, "DENY   "+dp) {
		t.Errorf("the session's log through the server: status %d, want the backend, its command, the allowed and the denied connection\n%s%s", code, stdout, stderr)
	}
	pods, err = cs.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelTenant + "=acme"})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("the tenant's pods after its session stopped: %d (%v), want none", len(pods.Items), err)
	}
}

// api sends one JSON request to the server's unix socket as root (an agent of acme).
func (s *servedCluster) api(ctx context.Context, t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	return s.raw(ctx, t, method, path, "application/json", []byte(body))
}

// A placed tenant's warm pool keeps whole sessions warm on the cluster (supervisor,
// running Pod, attached channel): a start from the pool is claimed, and its first
// command runs in the Pod at once.
func TestServeKubernetesPool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	contract := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\nlimits: {memory: 256MiB, pids: 128, cpu: 0.1}\n", podImage(t))
	s := serveCluster(ctx, t, contract, "    pools: [{name: warm, size: 1}]\n")
	sess, took := s.claimWarm(ctx, t, "warm")
	t.Logf("claimed %s from the pool in %v", sess.ID, took.Round(time.Millisecond))
	if sess.Backend != "kubernetes" || sess.Pool != "warm" {
		t.Errorf("the claimed session: %+v, want kubernetes from pool warm", sess)
	}
	code, stdout, stderr := cordonIn(ctx, t, s.env, t.TempDir(), "exec", sess.ID, "--", "/bin/sh", "-c", "id -u")
	if code != 0 || strings.TrimSpace(stdout) != fmt.Sprint(testUID) {
		t.Errorf("a command of the claimed session: status %d\n%s%s", code, stdout, stderr)
	}
	s.api(ctx, t, "POST", "/v1/sessions/"+sess.ID+"/stop", "")
}

// warmSession is the part of a started session the pool tests read.
type warmSession struct {
	ID, Backend, Pool string
	Warm              bool
}

// claimWarm starts a session from pool until one is claimed warm (a start while the
// pool has none ready is cold: it is stopped and asked again), and returns it and how
// long its start request took.
func (s *servedCluster) claimWarm(ctx context.Context, t *testing.T, pool string) (warmSession, time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; {
		var sess warmSession
		began := time.Now()
		code, body := s.api(ctx, t, "POST", "/v1/sessions", `{"pool": "`+pool+`"}`)
		took := time.Since(began)
		if code != http.StatusCreated || json.Unmarshal(body, &sess) != nil {
			t.Fatalf("a start from the pool: %d %s", code, body)
		}
		if sess.Warm {
			return sess, took
		}
		s.api(ctx, t, "POST", "/v1/sessions/"+sess.ID+"/stop", "")
		if time.Now().After(deadline) {
			t.Fatal("no start was claimed from the pool in 3 minutes")
		}
		time.Sleep(time.Second)
	}
}
