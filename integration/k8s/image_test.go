//go:build k8s

package k8s

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// checkoutBin is the absolute path of binary name of this checkout's bin/ (`make
// build`), or of $env when set; with beside, those binaries must be next to it too.
func checkoutBin(t *testing.T, env, name string, beside ...string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join("..", "..", "bin", name)
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

// cordonInit is the cordon-init binary the Pod's image carries ($CORDON_INIT).
func cordonInit(t *testing.T) string { return checkoutBin(t, "CORDON_INIT", "cordon-init") }

// cordonBin is the cordon binary ($CORDON_BIN), with cordon-engines beside it.
func cordonBin(t *testing.T) string { return checkoutBin(t, "CORDON_BIN", "cordon", "cordon-engines") }

// podImage makes the kubernetes placement's test image, both cordon's image (the init
// container copies /cordon-init from it) and the workload's: the host's static
// busybox with its applets, and cordon-init. It is imported into containerd's k8s.io
// namespace under a tag naming cordon-init's digest, so a rebuilt binary is a new
// image, and Pods use it with imagePullPolicy Never.
func podImage(t *testing.T) string {
	t.Helper()
	initBin, err := os.ReadFile(cordonInit(t))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(initBin)
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
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
