//go:build k8s

package k8s

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// TestBenchK8s is the benchmark of issue 37 (scripts/bench-k8s.sh, `make bench`) with
// CORDON_K8S_BENCH_RUNS set (the runs of each row), writing its table to
// $CORDON_K8S_BENCH_OUT (else the test log); without it, `make test` runs it once
// through, so that every path it measures is kept working (no timing is asserted). Side by side, in
// one run: a Pod session's cold start (create, Running, attached), a warm claim
// (claim, attached), a warm exec of `true` through the control channel, a plain exec
// of `true` in the same Pod through the API server (what `kubectl exec` does: client-go's
// remotecommand, WebSocket first, then SPDY), and a local bwrap session's start and
// `cordon exec SID -- true` ($CORDON_BIN, else bin/cordon of this checkout).
func TestBenchK8s(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("CORDON_K8S_BENCH_RUNS"))
	if runs <= 0 {
		runs = 1 // make test: once through
	}
	_, rc := clientConfig(t)
	// client-go's default rate limit (5 requests a second, bursts of 10) would time
	// the benchmark's own polling: a server sizes its client's for its load.
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Through cordon first, each in a subtest whose clean-up ends its Pods: the node's
	// CPU (2 cores here) holds only a few Pods at once.
	var through []benchRow
	t.Run("serve pool", func(t *testing.T) { through = append(through, servePool(ctx, t, runs)) })
	t.Run("cordon session", func(t *testing.T) {
		ns, node := namespaceWith(ctx, t, cs, restricted)
		through = append(through, cordonSession(t, runs, "kubernetes", backendEnv(t, ns, node, podImage(t), "bench"))...)
	})
	if t.Failed() {
		return
	}
	w := startPool(ctx, t, cs, 2)
	w.waitReady(ctx, t, 2) // the pool's first fill does not load the cold starts
	spec := podspec.InitSpec(w.plan, w.cfg, podEnv)
	var rows []benchRow

	cold := benchRow{name: "pod session: cold start (create -> Running -> attached)"}
	for range runs {
		s := w.session(t)
		began := time.Now()
		objs, err := w.p.Compile(w.plan, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.p.Create(ctx, objs); err != nil {
			t.Fatal(err)
		}
		if err := waitRunning(ctx, cs, w.cfg.Namespace, s.PodName()); err != nil {
			t.Fatal(err)
		}
		ch, err := w.p.Attach(ctx, rc, s, spec)
		if err != nil {
			t.Fatal(err)
		}
		cold.add(time.Since(began))
		ch.Close()
		if err := w.p.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	warm := benchRow{name: "pod session: warm claim (claim -> attached)"}
	claim := benchRow{name: "  of which the claim (list, policy, relabel)"}
	for range runs {
		w.waitReady(ctx, t, 1)
		began := time.Now()
		s, err := w.pool.Claim(ctx, w.session(t))
		if err != nil {
			t.Fatal(err)
		}
		claim.add(time.Since(began))
		ch, err := w.p.Attach(ctx, rc, s, spec)
		if err != nil {
			t.Fatal(err)
		}
		warm.add(time.Since(began))
		ch.Close()
		if err := w.p.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	// One attached session for the execs.
	w.waitReady(ctx, t, 1)
	s := w.claim(ctx, t, w.session(t))
	ch, err := w.p.Attach(ctx, rc, s, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	r := &runner{t: t, ch: ch, dir: w.plan.Workspace}
	channel := benchRow{name: "pod session: warm exec of true (control channel)"}
	plain := benchRow{name: "plain exec of true in the same pod (kubectl exec's path)"}
	ex := plainExec(t, cs, rc, w.cfg.Namespace, s.Pod)
	for range 3 * runs {
		began := time.Now()
		if code, _, _ := r.run("", "/bin/true"); code != 0 {
			t.Fatalf("true through the channel: status %d", code)
		}
		channel.add(time.Since(began))
		began = time.Now()
		if err := ex(ctx); err != nil {
			t.Fatalf("a plain exec of true: %v", err)
		}
		plain.add(time.Since(began))
	}
	rows = append(rows, cold, warm, claim, channel, plain)
	rows = append(rows, through...)
	rows = append(rows, cordonSession(t, runs, "bwrap", os.Environ())...)

	var b strings.Builder
	fmt.Fprintf(&b, "%-58s %10s %10s %6s\n", "what", "median ms", "p90 ms", "runs")
	for _, row := range rows {
		fmt.Fprintf(&b, "%-58s %10.1f %10.1f %6d\n", row.name, row.pct(0.5), row.pct(0.9), len(row.times))
	}
	if out := os.Getenv("CORDON_K8S_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("\n%s", b.String())
}

// benchRow is one row's samples.
type benchRow struct {
	name  string
	times []time.Duration
}

func (r *benchRow) add(d time.Duration) { r.times = append(r.times, d) }

// pct is the p quantile in ms (nearest rank).
func (r *benchRow) pct(p float64) float64 {
	if len(r.times) == 0 {
		return 0
	}
	xs := slices.Clone(r.times)
	slices.Sort(xs)
	return float64(xs[int(p*float64(len(xs)-1)+0.5)]) / float64(time.Millisecond)
}

// plainExec returns a function running `true` in the pod's sandbox container through
// the API server's exec API, as kubectl exec does (WebSocket, falling back to SPDY),
// with no stdin and the output discarded.
func plainExec(t *testing.T, cs *kubernetes.Clientset, rc *rest.Config, ns, pod string) func(context.Context) error {
	t.Helper()
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: podspec.ContainerName, Command: []string{"/bin/true"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(rc, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(rc, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) error {
		out := &lockedBuffer{}
		return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out, Stderr: out})
	}
}

// cordonSession times a session's start (`cordon session start --backend B`) and a
// warm `cordon exec SID -- true` in it, each as a whole command of the real binary,
// with env (a kubernetes session's placement).
func cordonSession(t *testing.T, runs int, backend string, env []string) []benchRow {
	t.Helper()
	bin := cordonBin(t)
	ws := t.TempDir()
	env = append(env, "CORDON_AUDIT_DIR="+t.TempDir()) // a ledger of the benchmark's own
	cordon := func(args ...string) (string, time.Duration) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = ws, env
		began := time.Now()
		out, err := cmd.Output()
		took := time.Since(began)
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("cordon %s: %v: %s%s", strings.Join(args, " "), err, out, stderr)
		}
		return strings.TrimSpace(string(out)), took
	}
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	where := "local session"
	if backend == "kubernetes" {
		where = "pod session"
	}
	start := benchRow{name: where + ": cordon session start --backend " + backend}
	var sid string
	for i := range runs {
		id, took := cordon("session", "start", "--backend", backend)
		start.add(took)
		if i < runs-1 {
			cordon("session", "stop", id)
		} else {
			sid = id
		}
	}
	defer cordon("session", "stop", sid)
	execRow := benchRow{name: where + ": cordon exec SID -- true (" + backend + ")"}
	for range 3 * runs {
		_, took := cordon("exec", sid, "--", "true")
		execRow.add(took)
	}
	if backend != "kubernetes" {
		return []benchRow{start, execRow}
	}
	// A Pod's command syncs its workspace back before and after it: what it costs
	// with 64 MiB of data and a 1 GiB sparse file in the workspace, beside the same
	// command in the empty one above (a sync takes only what changed since the last).
	cordon("exec", sid, "--", "sh", "-c", "head -c 67108864 /dev/urandom > data.bin && dd if=/dev/zero of=sparse.img bs=1 count=0 seek=1G 2>/dev/null")
	fullRow := benchRow{name: where + ": cordon exec SID -- true, 64 MiB + 1 GiB sparse in the workspace"}
	for range 3 * runs {
		_, took := cordon("exec", sid, "--", "true")
		fullRow.add(took)
	}
	return []benchRow{start, execRow, fullRow}
}

// servePool times a claim from a placed tenant's warm pool in `cordon serve` (POST
// /v1/sessions naming the pool, answered with a running, attached Pod session).
func servePool(ctx context.Context, t *testing.T, runs int) benchRow {
	t.Helper()
	contract := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\n", podImage(t))
	s := serveCluster(ctx, t, contract, "    pools: [{name: warm, size: 1}]\n")
	row := benchRow{name: "pod session: cordon serve pool claim (POST /v1/sessions)"}
	for range runs {
		sess, took := s.claimWarm(ctx, t, "warm")
		row.add(took)
		s.api(ctx, t, "POST", "/v1/sessions/"+sess.ID+"/stop", "")
	}
	return row
}
