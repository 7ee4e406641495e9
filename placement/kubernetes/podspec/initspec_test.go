package podspec

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/runner/container"
)

// Process 1's spec allows read-write exactly the mounts Compile makes writable (and
// the kubelet's and runtime's own), lets commands write the plan's writable paths
// only, hides the control socket, and says nothing of the network: no switch turns
// the self-check's loopback-only part off.
func TestInitSpec(t *testing.T) {
	plan, cfg := testPlan(), testConfig()
	spec := InitSpec(plan, cfg, []string{"PATH=/bin"})
	objs := compile(t, plan, cfg)
	var rw []string
	for _, m := range objs.Pod.Spec.Containers[0].VolumeMounts {
		if !m.ReadOnly {
			rw = append(rw, m.MountPath)
		}
	}
	for _, p := range rw {
		if !slices.Contains(spec.Writable, p) {
			t.Errorf("the Pod mounts %s read-write; the spec does not allow it", p)
		}
	}
	for _, p := range spec.Writable {
		if !slices.Contains(rw, p) && !slices.Contains(kubeletFiles, p) && !slices.Contains(runtimeWritable, p) && !slices.Contains(container.MaskedPaths, p) {
			t.Errorf("the spec allows %s read-write, which the Pod does not mount so", p)
		}
	}
	for _, p := range []string{"/src/proj/.git", "/src/proj/.env", "/etc/shadow", "/run/cordon"} {
		if slices.Contains(spec.Writable, p) || slices.Contains(spec.Write, p) {
			t.Errorf("%s is allowed read-write", p)
		}
	}
	if !slices.Equal(spec.Write, plan.Writable()) || !slices.Equal(spec.Read, []string{"/"}) {
		t.Errorf("Write %q, Read %q; want the plan's writable paths and the image's root", spec.Write, spec.Read)
	}
	if !slices.Equal(spec.Hide, []string{ControlDir, TerminationDir}) || !spec.Serve || spec.Control != nil ||
		spec.Egress != "" || len(spec.Argv) != 0 || spec.HostUID != 1000 || spec.Dir != plan.Workdir {
		t.Errorf("spec = %+v", spec)
	}
	if b, err := json.Marshal(spec); err != nil || strings.Contains(string(b), "network") {
		t.Errorf("the spec's JSON %s (err %v) names the network", b, err)
	}
	if c := objs.Pod.Spec.Containers[0].Command; !slices.Equal(c, InitCommand()) || c[len(c)-1] != ControlSocket {
		t.Errorf("process 1 is %q, want %q", c, InitCommand())
	}
}

// The kubelet's termination message file is a file on the node's disk, bound
// read-write at the container's terminationMessagePath: it must be outside /dev
// (whose device nodes commands may write) and in a directory hidden from commands.
func TestTerminationLogOutOfCommandsReach(t *testing.T) {
	plan := testPlan()
	objs, err := Compile(plan, Session{Tenant: "acme", ID: "s1"}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	spec := InitSpec(plan, testConfig(), nil)
	p := objs.Pod.Spec.Containers[0].TerminationMessagePath
	if p != TerminationLog || strings.HasPrefix(p, "/dev/") || !slices.Contains(spec.Hide, filepath.Dir(p)) || slices.Contains(spec.Write, p) {
		t.Errorf("terminationMessagePath %q, hidden %q: want %s, in a hidden directory", p, spec.Hide, TerminationLog)
	}
}
