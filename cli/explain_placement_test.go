//go:build !noengines || !linux

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestExplainKubernetes: `cordon explain --placement kubernetes` prints the
// NetworkPolicy and the Pod as YAML, the same bytes every time, under the placement
// config given; the flags' misuses are usage errors.
func TestExplainKubernetes(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	contractFile := filepath.Join(dir, "cordon.yaml")
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cordon.yaml", "version: 1\nimage: example.com/build:1\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\nlimits: {memory: 1GiB}\n")
	write("k8s.yaml", "version: 1\nnamespace: tenant-acme\ninitImage: cordon-init:1\nruntimeClass: runsc\nuid: 2000\ngid: 2000\n")

	out, errOut, code := run(t, "explain", "-c", contractFile, "--placement", "kubernetes", "--placement-config", filepath.Join(dir, "k8s.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	again, _, _ := run(t, "explain", "-c", contractFile, "--placement", "kubernetes", "--placement-config", filepath.Join(dir, "k8s.yaml"))
	if again != out {
		t.Error("two runs printed different YAML")
	}
	docs := strings.Split(out, "\n---\n")
	if len(docs) != 2 || !strings.Contains(docs[0], "kind: NetworkPolicy") {
		t.Fatalf("want a NetworkPolicy then a Pod:\n%s", out)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &pod); err != nil {
		t.Fatalf("the Pod's YAML: %v\n%s", err, docs[1])
	}
	c := pod.Spec.Containers[0]
	if pod.Kind != "Pod" || pod.Namespace != "tenant-acme" || *pod.Spec.RuntimeClassName != "runsc" || c.Image != "example.com/build:1" ||
		*c.SecurityContext.RunAsUser != 2000 || !*c.SecurityContext.ReadOnlyRootFilesystem || c.Command[0] != "/run/cordon/cordon" {
		t.Errorf("the Pod is not the one the contract and config ask for:\n%s", docs[1])
	}
	if !bytes.Contains([]byte(out), []byte("memory: 1Gi")) {
		t.Errorf("the contract's memory limit is missing:\n%s", out)
	}
	// The workspace sidecar, which fills and packs the workspace, is shown.
	sidecar := false
	for _, ic := range pod.Spec.InitContainers {
		for _, m := range ic.VolumeMounts {
			sidecar = sidecar || ic.Name == "cordon-workspace" && m.Name == "workspace" && m.MountPath == "/run/cordon-workspace" && ic.RestartPolicy != nil
		}
	}
	if !sidecar {
		t.Errorf("no workspace sidecar mounting the whole workspace volume:\n%s", docs[1])
	}

	// Without a config: the example namespace.
	if out, errOut, code := run(t, "explain", "-c", contractFile, "--placement", "kubernetes"); code != 0 || !strings.Contains(out, "namespace: cordon-example") {
		t.Errorf("without a config: exit %d, %s%s", code, errOut, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--placement", "moon"}, 2, "want local or kubernetes"},
		{[]string{"--placement", "kubernetes", "--json"}, 2, "leave out --json"},
		{[]string{"--placement-config", "k8s.yaml"}, 2, "add --placement kubernetes"},
		{[]string{"--placement", "kubernetes", "--placement-config", "missing.yaml"}, 1, "missing.yaml"},
	} {
		_, errOut, code := run(t, append([]string{"explain", "-c", contractFile}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	// A contract without an image: a Pod has no host view.
	write("cordon.yaml", "version: 1\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\n")
	if _, errOut, code := run(t, "explain", "-c", contractFile, "--placement", "kubernetes"); code != 1 || !strings.Contains(errOut, "needs an image") {
		t.Errorf("no image: exit %d, stderr %q; want 1 and a refusal", code, errOut)
	}
}
