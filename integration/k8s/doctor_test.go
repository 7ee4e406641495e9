//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// doctorResult is the part of `cordon doctor --json` the test reads.
type doctorResult struct {
	Backends []struct {
		Backend string              `json:"backend"`
		View    string              `json:"view"`
		OK      bool                `json:"ok"`
		Error   string              `json:"error"`
		Checks  []wire.PostureCheck `json:"checks"`
	} `json:"backends"`
}

// `cordon doctor --placement kubernetes` measures a session's Pod from inside, through
// the real binary: every check passes (loopback only among them) and the Pod is gone
// afterwards. A node without cordon's seccomp profile cannot run the Pod: doctor says
// so with status 125 rather than waiting, and leaves nothing either.
func TestDoctorPlacement(t *testing.T) {
	bin := cordonBin(t)
	cs, _ := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	plan := testPlan(t, image)
	dir := t.TempDir()
	kubeconfig := os.Getenv("CORDON_K8S_KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = defaultKubeconfig
	}
	doctor := func(t *testing.T, extra string) (int, doctorResult, string) {
		t.Helper()
		cfg := filepath.Join(dir, "k8s.yaml")
		data := fmt.Sprintf("version: 1\nnamespace: %s\ninitImage: %s\nnodeName: %s\nuid: %d\ngid: %d\n%s", ns, image, node, testUID, testUID, extra)
		if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, bin, "doctor", "--placement", "kubernetes", "--placement-config", cfg,
			"--kubeconfig", kubeconfig, "-c", plan.ContractFile, "--json")
		cmd.Dir = plan.Workspace
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("cordon doctor: %v", err)
		}
		var r doctorResult
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || len(r.Backends) != 1 {
			t.Fatalf("cordon doctor: status %d, output not one backend's report (%v):\n%s%s", code, err, stdout.String(), stderr.String())
		}
		left, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: podspec.LabelTenant + "=doctor"})
		if err != nil || len(left.Items) != 0 {
			t.Errorf("after cordon doctor: %d of its pods left (%v)", len(left.Items), err)
		}
		return code, r, stderr.String()
	}

	t.Run("passes", func(t *testing.T) {
		code, r, stderr := doctor(t, "")
		b := r.Backends[0]
		network := false
		for _, c := range b.Checks {
			network = network || c.Name == "network interfaces" && c.OK
			if !c.OK {
				t.Errorf("check %s: got %s, want %s (%s)", c.Name, c.Got, c.Want, c.Detail)
			}
		}
		if code != 0 || !b.OK || b.Backend != "kubernetes" || !network || !strings.Contains(b.View, ns) {
			t.Errorf("cordon doctor: status %d, report %+v, want 0, ok, a loopback-only network check, the namespace named\n%s", code, b, stderr)
		}
	})
	t.Run("no seccomp profile", func(t *testing.T) {
		start := time.Now()
		code, r, stderr := doctor(t, "seccompProfile: cordon/absent.json\n")
		b := r.Backends[0]
		if code != 125 || b.OK || !strings.Contains(b.Error, "cannot run") || len(b.Checks) != 0 {
			t.Errorf("cordon doctor on a node without the profile: status %d, report %+v, want 125 and why the pod cannot run\n%s", code, b, stderr)
		}
		t.Logf("refused after %v: %s", time.Since(start).Round(time.Millisecond), b.Error)
	})
}
