package docker

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/mount"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/runner/container"
	"github.com/cordonhq/cordon/runner/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func testInput() container.Input {
	run := "/run/cordon/runs/R"
	return container.Input{
		Plan: &contract.Plan{
			Workspace: "/home/dev/proj", Workdir: "/home/dev/proj", Home: "/home/dev", Image: "busybox:1",
			Mounts: []contract.Mount{
				{Path: "/etc", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Why: "@system"},
				{Path: "/home/dev", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true},
				{Path: "/home/dev/proj", Type: contract.Bind, Access: contract.ReadWrite, Dir: true},
				{Path: "/home/dev/proj/.env", Type: contract.Mask},
				{Path: "/tmp", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true},
			},
			Limits: contract.LimitsPlan{Memory: 64 << 20, Pids: 30, CPU: 1.5},
		},
		Host: sandbox.Host{
			RunID: "R", RunDir: run, Init: "/usr/local/bin/cordon", MaskFile: run + "/mask-file",
			MaskDir: run + "/mask-dir", ControlSocket: run + "/control.sock", ControlToken: "T",
		},
		HostInitDir: run + "/init", UID: 1000, GID: 1000, Image: true,
	}
}

func TestConfigGolden(t *testing.T) {
	cfg, hc := config(testInput(), "busybox:1", "/run/cordon/runs/R/etc", map[string]string{container.LabelRun: "R"})
	data, err := json.MarshalIndent(struct{ Config, HostConfig any }{cfg, hc}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, '\n')
	p := filepath.Join("testdata", "config.golden")
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
		t.Errorf("config differs from testdata/config.golden (go test -update rewrites it):\n%s", data)
	}
}

// The properties the sandbox rests on, each checked on its own.
func TestConfigBoundary(t *testing.T) {
	cfg, hc := config(testInput(), "busybox:1", "/etc-dir", nil)
	checks := []struct {
		name string
		ok   bool
	}{
		{"no network", hc.NetworkMode == "none"},
		{"read-only root", hc.ReadonlyRootfs},
		{"every capability dropped", len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL" && len(hc.CapAdd) == 0},
		{"no-new-privileges, default seccomp", len(hc.SecurityOpt) == 1 && hc.SecurityOpt[0] == "no-new-privileges"},
		{"not privileged", !hc.Privileged},
		{"the workspace owner", cfg.User == "1000:1000"},
		{"cordon's pid1", len(cfg.Entrypoint) == 5 && cfg.Entrypoint[0] == container.InitPath},
		{"no environment in the engine's config", len(cfg.Env) == 0},
		{"memory without swap", hc.Memory == 64<<20 && hc.MemorySwap == 64<<20},
		{"pids", hc.PidsLimit != nil && *hc.PidsLimit == 30},
		{"cpu", hc.NanoCPUs == 1_500_000_000},
		{"no log file", hc.LogConfig.Type == "none"},
		{"executable private /tmp", hc.Tmpfs["/tmp"] == "nosuid,nodev,mode=1777,uid=1000,gid=1000,exec"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not so in %+v %+v", c.name, cfg, hc)
		}
	}
	etc := 0
	for _, m := range hc.Mounts {
		if m.Target == "/etc" {
			t.Error("@system's /etc must not be mounted over the image's")
		}
		if m.Type == mount.TypeBind && m.Source[:5] == "/etc-" {
			etc++
			if !m.ReadOnly {
				t.Errorf("%s must be read-only", m.Target)
			}
		}
	}
	if etc != 3 {
		t.Errorf("want read-only /etc/hosts, /etc/hostname and /etc/resolv.conf of cordon's, got %d", etc)
	}
}
