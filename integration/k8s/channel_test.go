//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// podEnv is the commands' environment in these tests.
var podEnv = []string{"PATH=/bin", "HOME=/tmp", "CORDON_TEST=1"}

// The Pod's process 1 is cordon's `internal init`, reached through the API server's
// exec API: a command sent on the control channel runs, its output and status come
// back, and it runs under cordon's own seccomp filter (stacked on the runtime's) and
// Landlock ruleset, with the spec's environment. Nothing else in the Pod can reach
// process 1 once cordon has attached. Closing the channel ends the Pod.
func TestPodChannel(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	p, s := startPlaced(ctx, t, cs, plan, cfg)
	name := podspec.Name(s.ID)
	plain := func(script string) (string, error) {
		return execIn(ctx, cs, rc, ns, name, podspec.ContainerName, []string{"/bin/sh", "-c", script})
	}
	baseline(t, plain)
	spec := podspec.InitSpec(plan, cfg, podEnv)
	ch, err := p.Attach(ctx, rc, s, spec)
	if err != nil {
		t.Fatalf("attaching: %v%s", err, describe(ctx, cs, ns, name))
	}
	defer ch.Close()
	r := &runner{t: t, ch: ch, dir: plan.Workspace}

	code, stdout, stderr := r.run("in\n", "/bin/sh", "-c", "echo out; echo err >&2; cat; exit 3")
	if code != 3 || stdout != "out\nin\n" || stderr != "err\n" {
		t.Errorf("a command: status %d, stdout %q, stderr %q; want 3, \"out\\nin\\n\", \"err\\n\"", code, stdout, stderr)
	}
	if code, _, _ := r.run("", "no-such-command"); code != 127 {
		t.Errorf("a missing command: status %d, want 127", code)
	}
	// Confined: cordon's filter on top of the runtime's, which denies adjtimex (the
	// runtime's allows it, above); Landlock, which denies writes outside the plan's
	// writable paths (the control socket's volume is writable to the uid, above) and
	// allows the workspace. cordon's own measure of the posture passes whole.
	script := `grep -E '^(Seccomp|Seccomp_filters|NoNewPrivs):' /proc/self/status
adjtimex >/dev/null 2>&1 && echo adjtimex=ok || echo adjtimex=denied
touch /run/cordon-control/probe 2>/dev/null && echo control=ok || echo control=denied
touch ` + plan.Workspace + `/probe && echo workspace=ok
env | sort`
	code, stdout, stderr = r.run("", "/bin/sh", "-c", script)
	t.Logf("measured through the channel (status %d):\n%s%s", code, stdout, stderr)
	for _, want := range []string{"Seccomp:\t2\n", "Seccomp_filters:\t2\n", "NoNewPrivs:\t1\n", "adjtimex=denied\n",
		"control=denied\n", "workspace=ok\n", "CORDON_TEST=1\n", "HOME=/tmp\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("through the channel: want %q in\n%s", want, stdout)
		}
	}
	r.posture(spec.Writable)
	if strings.Contains(stdout, "KUBERNETES_") {
		t.Errorf("the kubelet's environment reached the command:\n%s", stdout)
	}

	// A second client: the socket is gone, and the relay cordon would exec cannot
	// reach process 1 (from a plain exec, outside any confinement).
	out, err := plain(`echo "socket=[$(ls -A /run/cordon-control)]"; /run/cordon/cordon internal attach ` + podspec.ControlSocket + ` </dev/null; echo "attach=$?"`)
	t.Logf("a second attach:\n%s", out)
	if err != nil || !strings.Contains(out, "attach=1") || !strings.Contains(out, "socket=[]") {
		t.Errorf("a second attach: %q (%v), want it refused (status 1) with the socket gone", out, err)
	}
	// The channel still works.
	if code, stdout, _ := r.run("", "/bin/echo", "still"); code != 0 || stdout != "still\n" {
		t.Errorf("after the second attach: status %d, stdout %q", code, stdout)
	}

	// A signal reaches the command (its process group).
	id, _ := r.send("", "/bin/sleep", "600")
	if err := ch.Conn.Send(ctl.Msg{Op: ctl.OpSignal, ID: id, Sig: int(syscall.SIGTERM)}); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(id); code != 128+int(syscall.SIGTERM) {
		t.Errorf("sleep after SIGTERM: status %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	// Hanging up ends the session: process 1 kills what runs and exits 0.
	r.send("", "/bin/sleep", "600")
	ch.Close()
	if code, err := waitTerminated(ctx, cs, ns, name); err != nil || code != 0 {
		t.Errorf("after hanging up: process 1 exited %d (%v), want 0", code, err)
	}
}

// A Pod whose mounts are not what the spec allows fails process 1's self-check, as a
// container would: Attach says why, and nothing runs. (Its network part, loopback
// only, has no switch: every Pod passes it in its empty network namespace, which
// TestPodNetwork measures.)
func TestPodChannelSelfCheck(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	p, s := startPlaced(ctx, t, cs, plan, cfg)
	spec := podspec.InitSpec(plan, cfg, podEnv)
	var writable []string
	for _, w := range spec.Writable {
		if w != plan.Workspace {
			writable = append(writable, w)
		}
	}
	spec.Writable = writable
	_, err := p.Attach(ctx, rc, s, spec)
	if !errors.Is(err, errdefs.ErrSandbox) || !strings.Contains(err.Error(), plan.Workspace+" is mounted read-write") {
		t.Fatalf("Attach with the workspace not allowed read-write = %v, want the self-check's refusal naming it", err)
	}
	t.Logf("refused: %v", err)
	if code, err := waitTerminated(ctx, cs, ns, podspec.Name(s.ID)); err != nil || code != 125 {
		t.Errorf("process 1 exited %d (%v), want 125 (the self-check failed)", code, err)
	}
}

// baseline shows, outside cordon's confinement (a plain exec: the runtime's profile
// only), what the channel's commands must not be able to do, done: without it the
// comparison says nothing.
func baseline(t *testing.T, plain func(string) (string, error)) {
	t.Helper()
	// Process 1 makes its socket as it starts, which may be after the Pod is reported
	// running: on a busy machine the first exec can come first. Asked again until it
	// is there (the test's context bounds the wait).
	var out string
	var err error
	for i := 0; ; i++ {
		out, err = plain(`grep Seccomp_filters /proc/self/status; adjtimex >/dev/null && echo adjtimex=ok; touch /run/cordon-control/probe && rm /run/cordon-control/probe && echo control=ok; ls /run/cordon-control`)
		if err != nil || strings.Contains(out, "init.sock\n") {
			break
		}
		if i == 0 {
			t.Logf("process 1's socket is not there yet; waiting for it:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("a plain exec, before cordon attached:\n%s", out)
	for _, want := range []string{"Seccomp_filters:\t1\n", "adjtimex=ok\n", "control=ok\n", "init.sock\n"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("a plain exec: want %q in %q (%v)", want, out, err)
		}
	}
}

// waitTerminated waits until the pod's sandbox container has terminated and returns
// its status.
func waitTerminated(ctx context.Context, cs *kubernetes.Clientset, ns, name string) (int32, error) {
	for {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return -1, err
		}
		for _, c := range pod.Status.ContainerStatuses {
			if c.Name == podspec.ContainerName && c.State.Terminated != nil {
				return c.State.Terminated.ExitCode, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runner runs commands on a control channel, one at a time.
type runner struct {
	t    *testing.T
	ch   *placement.Channel
	dir  string
	next uint64
}

// output collects an exec's stdout and stderr until their ends.
type output struct {
	wg             sync.WaitGroup
	stdout, stderr bytes.Buffer
}

// run runs argv with stdin and returns its status and output.
func (r *runner) run(stdin string, argv ...string) (int, string, string) {
	r.t.Helper()
	id, out := r.send(stdin, argv...)
	code := r.wait(id)
	out.wg.Wait()
	return code, out.stdout.String(), out.stderr.String()
}

// send sends one exec request with stdin and returns its id and its output.
func (r *runner) send(stdin string, argv ...string) (uint64, *output) {
	r.t.Helper()
	r.next++
	id := r.next
	inR, inW, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	err = r.ch.Conn.Send(ctl.Msg{Op: ctl.OpExec, ID: id, Argv: argv, Dir: r.dir}, inR, outW, errW)
	ctl.CloseFiles([]*os.File{inR, outW, errW})
	if err != nil {
		r.t.Fatalf("sending exec: %v", err)
	}
	go func() {
		_, _ = io.WriteString(inW, stdin)
		inW.Close()
	}()
	out := &output{}
	out.wg.Add(2)
	go func() { defer out.wg.Done(); _, _ = io.Copy(&out.stdout, outR) }()
	go func() { defer out.wg.Done(); _, _ = io.Copy(&out.stderr, errR) }()
	return id, out
}

// wait reads the next message, which must be exec id's exit (within 30 s), and
// returns its status.
func (r *runner) wait(id uint64) int {
	r.t.Helper()
	_ = r.ch.UC.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer r.ch.UC.SetReadDeadline(time.Time{})
	m, files, err := r.ch.Conn.Recv()
	ctl.CloseFiles(files)
	if err != nil || m.Op != ctl.OpExit || m.ID != id || m.Error != "" {
		r.t.Fatalf("waiting for exec %d's exit: %+v (%v)", id, m, err)
	}
	return m.Code
}

// posture runs cordon's own measure of the sandbox from inside, as `cordon doctor`
// does on every backend, and fails on any check that does not pass; "network
// interfaces" (loopback only) must be among them.
func (r *runner) posture(writable []string) {
	r.t.Helper()
	argv := []string{"/run/cordon/cordon", "internal", wire.PostureArg}
	for _, w := range writable {
		argv = append(argv, "--writable", w)
	}
	code, out, stderr := r.run("", argv...)
	var p wire.Posture
	if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Checks) == 0 {
		r.t.Fatalf("internal posture: status %d, %v\n%s%s", code, err, out, stderr)
	}
	network := false
	for _, c := range p.Checks {
		network = network || c.Name == "network interfaces"
		if !c.OK {
			r.t.Errorf("posture: %s: got %s, want %s (%s)", c.Name, c.Got, c.Want, c.Detail)
		}
	}
	if !network {
		r.t.Errorf("posture: no \"network interfaces\" check among %d", len(p.Checks))
	}
}

// The server's RBAC (deploy/kubernetes) grants `create` on pods/exec and nothing else
// of it: the API server refuses it the WebSocket exec (a GET, authorized as `get` as
// well), and Attach falls back to SPDY. Shown with an identity granted exactly that.
func TestPodChannelLeastPrivilege(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	user := "cordon-test-attach"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "attach"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "attach"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "attach"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	image := podImage(t)
	plan := testPlan(t, image)
	cfg := podspec.Config{Namespace: ns, InitImage: image, NodeName: node, UID: testUID, GID: testUID}
	p, s := startPlaced(ctx, t, cs, plan, cfg)
	limited := rest.CopyConfig(rc)
	limited.Impersonate = rest.ImpersonationConfig{UserName: user}
	ch, err := p.Attach(ctx, limited, s, podspec.InitSpec(plan, cfg, podEnv))
	if err != nil {
		t.Fatalf("attaching with create on pods/exec only: %v", err)
	}
	defer ch.Close()
	r := &runner{t: t, ch: ch, dir: plan.Workspace}
	if code, stdout, _ := r.run("", "/bin/echo", "ok"); code != 0 || stdout != "ok\n" {
		t.Errorf("a command: status %d, stdout %q", code, stdout)
	}
}
