//go:build k8s

// Package k8stest is what the tests against the project's Kubernetes test cluster
// share (scripts/k8s-env.sh starts it): the client, a fresh namespace, the Pod test
// image, the binaries of this checkout, and the environment that places cordon's
// runs on the cluster. integration/k8s and the integration package's Pod runs of
// the escape tests use it.
package k8stest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cordonhq/cordon/internal/testutil"
)

// DefaultKubeconfig is where scripts/k8s-env.sh writes the test cluster's kubeconfig.
const DefaultKubeconfig = "/var/lib/cordon-k8s/kubeconfig"

// TestUID is the uid (and gid) the tests' Pods run as.
const TestUID = 1000

// Restricted are the labels of a namespace enforcing the restricted Pod Security
// profile.
var Restricted = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// Kubeconfig is the test cluster's kubeconfig: $CORDON_K8S_KUBECONFIG, else the
// default.
func Kubeconfig() string {
	if p := os.Getenv("CORDON_K8S_KUBECONFIG"); p != "" {
		return p
	}
	return DefaultKubeconfig
}

// ClientConfig is a clientset for the test cluster and the REST config it was made
// from, skipping (failing under CI=true) when there is no kubeconfig.
func ClientConfig(t *testing.T) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	path := Kubeconfig()
	_, err := os.Stat(path)
	testutil.Require(t, err == nil, fmt.Sprintf("a test cluster: %v (scripts/k8s-env.sh starts it)", err))
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cs, cfg
}

// root is this checkout's top directory.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// CheckoutBin is the absolute path of binary name of this checkout's bin/ (`make
// build`), or of $env when set; with beside, those binaries must be next to it too.
func CheckoutBin(t *testing.T, env, name string, beside ...string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(root(), "bin", name)
	}
	p, err := filepath.Abs(p)
	for _, want := range append([]string{filepath.Base(p)}, beside...) {
		if err == nil {
			_, err = os.Stat(filepath.Join(filepath.Dir(p), want))
		}
	}
	testutil.Require(t, err == nil, fmt.Sprintf("%s: %v (make build makes it)", name, err))
	return p
}

// CordonInit is the cordon-init binary the Pod's image carries ($CORDON_INIT).
func CordonInit(t *testing.T) string { return CheckoutBin(t, "CORDON_INIT", "cordon-init") }

// CordonBin is the cordon binary ($CORDON_BIN), with cordon-engines beside it.
func CordonBin(t *testing.T) string { return CheckoutBin(t, "CORDON_BIN", "cordon", "cordon-engines") }

// BackendEnv is the environment (added to the process's own) that places cordon's
// runs on the test cluster in namespace ns on node, as tenant: the kubernetes
// backend's config file (naming image as the Pods' image when a contract names none,
// and as cordon's own), the cluster's kubeconfig, the tenant's name.
func BackendEnv(t *testing.T, ns, node, image, tenant string) []string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "placement.yaml")
	data := fmt.Sprintf("version: 1\nnamespace: %s\nimage: %s\ninitImage: %s\nnodeName: %s\nuid: %d\ngid: %d\n", ns, image, image, node, TestUID, TestUID)
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"CORDON_PLACEMENT_CONFIG=" + cfg, "CORDON_KUBECONFIG=" + Kubeconfig(), "CORDON_TENANT=" + tenant}
}

// PodImage makes the kubernetes placement's test image, both cordon's image (the init
// container copies /cordon-init from it) and the workload's: the host's static
// busybox with its applets, curl, bash and openssl with their libraries, and cordon-init. It is imported into containerd's k8s.io
// namespace under a tag naming cordon-init's digest, so a rebuilt binary is a new
// image, and Pods use it with imagePullPolicy Never.
func PodImage(t *testing.T) string {
	t.Helper()
	initBin, err := os.ReadFile(CordonInit(t))
	if err != nil {
		t.Fatal(err)
	}
	// The tag names cordon-init's digest and the host tools the image carries.
	named := slices.Clone(imageTools)
	for _, l := range imageLinks {
		named = append(named, l[0]+" -> "+l[1])
	}
	sum := sha256.Sum256(append(initBin, strings.Join(named, "\n")...))
	ref := "cordon-test/k8s-pod:" + hex.EncodeToString(sum[:6])
	if out, err := exec.Command("ctr", "-n", "k8s.io", "images", "ls", "-q").Output(); err == nil &&
		strings.Contains(string(out), "docker.io/"+ref+"\n") {
		return ref
	}
	archive := podRootfs(t, initBin)
	imp := exec.Command("docker", "import", "-m", "cordon kubernetes placement test image", "-", ref)
	imp.Stdin = bytes.NewReader(archive)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v: %s", err, out)
	}
	save := exec.Command("sh", "-c", `docker save "$1" | ctr -n k8s.io images import -`, "sh", ref)
	if out, err := save.CombinedOutput(); err != nil {
		t.Fatalf("importing %s into containerd's k8s.io namespace: %v: %s", ref, err, out)
	}
	return ref
}

// podRootfs is the image's root file system as a tar archive.
func podRootfs(t *testing.T, initBin []byte) []byte {
	t.Helper()
	busybox, err := os.ReadFile("/bin/busybox")
	testutil.Require(t, err == nil, fmt.Sprintf("a static busybox: %v (scripts/container-env.sh installs it)", err))
	applets, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	add := func(h *tar.Header, data []byte) {
		h.ModTime, h.Uid, h.Gid = epoch, 0, 0
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin/", "etc/", "tmp/", "run/"} {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}, nil)
	}
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(busybox))}, busybox)
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "cordon-init", Mode: 0o755, Size: int64(len(initBin))}, initBin)
	var files []hostFile
	tools := map[string]bool{}
	for _, tool := range imageTools {
		tools[filepath.Base(tool)] = true
	}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" && !tools[a] {
			add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
		}
	}
	made := map[string]bool{"bin": true, "etc": true, "tmp": true, "run": true}
	for _, f := range hostTools(t) {
		rel := strings.TrimPrefix(f, "/")
		for d := filepath.Dir(rel); d != "." && !made[d]; d = filepath.Dir(d) {
			made[d] = true // added below, parents first
		}
		data, err := os.ReadFile(f) // a library's link followed: the image holds the file
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, hostFile{rel, data})
	}
	for _, l := range imageLinks {
		for d := filepath.Dir(l[0]); d != "." && !made[d]; d = filepath.Dir(d) {
			made[d] = true
		}
	}
	dirs := make([]string, 0, len(made))
	for d := range made {
		if d != "bin" && d != "etc" && d != "tmp" && d != "run" {
			dirs = append(dirs, d)
		}
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, d := range dirs {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}, nil)
	}
	for _, f := range files {
		add(&tar.Header{Typeflag: tar.TypeReg, Name: f.rel, Mode: 0o755, Size: int64(len(f.data))}, f.data)
	}
	for _, l := range imageLinks {
		add(&tar.Header{Typeflag: tar.TypeSymlink, Name: l[0], Linkname: l[1], Mode: 0o777}, nil)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostFile is one of the host's files copied into the image.
type hostFile struct {
	rel  string
	data []byte
}

// imageTools are host programs the Pod image carries besides busybox, with the
// libraries they load (ldd), at the host's paths: what the escape tests run (curl,
// bash, openssl, git) that busybox does not have.
var imageTools = []string{"/usr/bin/curl", "/usr/bin/bash", "/usr/bin/openssl", "/usr/bin/git"}

// imageLinks are symbolic links the image holds beside imageTools (path, target):
// git runs its own commands (a commit's "git maintenance run --auto") from its exec
// path, whose "git" is git itself. Nothing else of /usr/lib/git-core is needed: its
// other entries are git's builtins under other names, and the tests' git commands
// name them as git's subcommands; no test runs git init in a Pod (templates).
var imageLinks = [][2]string{{"usr/lib/git-core/git", "/usr/bin/git"}}

// hostTools is imageTools and the shared libraries and loader they need.
func hostTools(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, tool := range imageTools {
		lddOut, err := exec.Command("ldd", tool).Output()
		testutil.Require(t, err == nil, fmt.Sprintf("%s and ldd: %v (scripts/deps.sh installs them)", tool, err))
		paths := []string{tool}
		for _, line := range strings.Split(string(lddOut), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
				paths = append(paths, f[2])
			case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
				paths = append(paths, f[0])
			}
		}
		for _, p := range paths {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// NamespaceWith makes a fresh namespace with labels (a Pod Security level) and its
// default ServiceAccount (the test cluster runs no controller-manager to make it) and
// returns its name and the node to bind Pods to (it runs no scheduler either). Its
// Pods and NetworkPolicies are deleted at the end of the test.
func NamespaceWith(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, labels map[string]string) (string, string) {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("the cluster has no node")
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cordon-smoke-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		zero := int64(0)
		pods := cs.CoreV1().Pods(name)
		if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the pods of %s: %v", name, err)
		}
		if err := cs.NetworkingV1().NetworkPolicies(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the network policies of %s: %v", name, err)
		}
		// Without a namespace controller the namespace stays Terminating; it holds nothing.
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	no := false
	_, err = cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta:                   metav1.ObjectMeta{Name: "default"},
		AutomountServiceAccountToken: &no,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the default ServiceAccount: %v", err)
	}
	return name, nodes.Items[0].Name
}
