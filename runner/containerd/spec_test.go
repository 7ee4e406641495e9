package containerd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/runner/container"
	"github.com/cordonhq/cordon/runner/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func testInput(image bool) container.Input {
	run := "/run/cordon/runs/R"
	return container.Input{
		Plan: &contract.Plan{
			Workspace: "/home/dev/proj", Workdir: "/home/dev/proj", Home: "/home/dev",
			Mounts: []contract.Mount{
				{Path: "/home/dev", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true},
				{Path: "/home/dev/proj", Type: contract.Bind, Access: contract.ReadWrite, Dir: true},
				{Path: "/tmp", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true},
			},
			Limits: contract.LimitsPlan{Memory: 64 << 20, Pids: 30, CPU: 0.5},
		},
		Host: sandbox.Host{
			RunID: "R", RunDir: run, Init: "/usr/local/bin/cordon", MaskFile: run + "/mask-file",
			MaskDir: run + "/mask-dir", ControlSocket: run + "/control.sock", ControlToken: "T",
		},
		HostInitDir: run + "/init", UID: 1000, GID: 1000, Image: image,
	}
}

func generate(t *testing.T, opts ...oci.SpecOpts) *oci.Spec {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), DefaultNamespace)
	s, err := oci.GenerateSpec(ctx, nil, &containers.Container{ID: "cordon-R"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSpecGolden(t *testing.T) {
	s := generate(t, specOpts(testInput(false), "/run/cordon/runs/R/rootfs")...)
	s.Linux.Seccomp = nil // the engine's profile, large and not ours
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, '\n')
	p := filepath.Join("testdata", "spec.golden")
	if *update {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(data, want) {
		t.Errorf("spec differs from testdata/spec.golden (go test -update rewrites it):\n%s", data)
	}
}

func TestSpecOptions(t *testing.T) {
	in := testInput(true)
	t.Run("no capabilities", func(t *testing.T) {
		c := generate(t, withNoCapabilities).Process.Capabilities
		if len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
			t.Errorf("capabilities left: %+v", c)
		}
	})
	t.Run("seccomp after capabilities", func(t *testing.T) {
		s := generate(t, specOpts(in, "")...)
		if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
			t.Errorf("want containerd's default seccomp profile, got %+v", s.Linux.Seccomp)
		}
		if !s.Process.NoNewPrivileges || !s.Root.Readonly {
			t.Error("want no_new_privs and a read-only root")
		}
	})
	t.Run("clone3 answers ENOSYS", func(t *testing.T) {
		s := generate(t, specOpts(in, "")...)
		var rules []specs.LinuxSyscall
		for _, r := range s.Linux.Seccomp.Syscalls {
			if slices.Contains(r.Names, "clone3") {
				rules = append(rules, r)
			}
		}
		if len(rules) != 1 || rules[0].Action != specs.ActErrno || rules[0].ErrnoRet == nil || *rules[0].ErrnoRet != 38 {
			t.Errorf("want one clone3 rule, ENOSYS; got %+v", rules)
		}
	})
	t.Run("mounts: no writable /run, the plan's added", func(t *testing.T) {
		s := generate(t, withMounts(container.Mounts(in)))
		var dst []string
		for _, m := range s.Mounts {
			dst = append(dst, m.Destination)
		}
		if slices.Contains(dst, "/run") {
			t.Errorf("the default spec's /run tmpfs must go: %v", dst)
		}
		for _, want := range []string{"/proc", "/dev", "/sys", "/home/dev/proj", container.InitDir, container.InitPath, sandbox.ControlPath} {
			if !slices.Contains(dst, want) {
				t.Errorf("%s missing from %v", want, dst)
			}
		}
	})
	t.Run("an empty network namespace", func(t *testing.T) {
		s := generate(t, specOpts(in, "")...)
		if !slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace && n.Path == "" }) {
			t.Errorf("want a new network namespace: %+v", s.Linux.Namespaces)
		}
	})
	t.Run("limits", func(t *testing.T) {
		r := generate(t, withLimits(in)).Linux.Resources
		if *r.Memory.Limit != 64<<20 || *r.Memory.Swap != 64<<20 || r.Pids.Limit != 30 || *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 {
			t.Errorf("limits: %+v %+v %+v %+v", *r.Memory, r.Pids, *r.CPU.Quota, *r.CPU.Period)
		}
	})
	t.Run("environment from nothing", func(t *testing.T) {
		if env := generate(t, withEnv(nil)).Process.Env; len(env) != 0 {
			t.Errorf("pid1's environment: %q", env)
		}
	})
	t.Run("masked paths", func(t *testing.T) {
		if s := generate(t, specOpts(in, "")...); !slices.Equal(s.Linux.MaskedPaths, container.MaskedPaths) {
			t.Errorf("masked: %v", s.Linux.MaskedPaths)
		}
	})
}
