package container

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/secret"
	"github.com/cordonhq/cordon/runner/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixturePlan is a plan with one mount of every kind, as Compile makes them.
func fixturePlan() *contract.Plan {
	return &contract.Plan{
		Workspace: "/home/dev/proj", Workdir: "/home/dev/proj/sub", Home: "/home/dev",
		ContractDigest: "sha256:0123",
		Mounts: []contract.Mount{
			{Path: "/etc", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Why: "@system"},
			{Path: "/etc/shadow", Type: contract.Mask, Why: "@system never shows host secrets"},
			{Path: "/etc/ssl/private", Type: contract.Mask, Dir: true, Why: "@system never shows host secrets"},
			{Path: "/home/dev", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true, Why: "empty private $HOME"},
			{Path: "/home/dev/proj", Type: contract.Bind, Access: contract.ReadWrite, Dir: true, Why: "filesystem.writable (default)"},
			{Path: "/home/dev/proj/.env", Type: contract.Mask, Why: "filesystem.deny_read at cordon.yaml:3:16"},
			{Path: "/home/dev/proj/.git", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Create: contract.PlaceholderDir, Why: "filesystem.deny_write (default)"},
			{Path: "/opt/data", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Why: "filesystem.readable at cordon.yaml:2:14"},
			{Path: "/tmp", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true, Why: "private /tmp"},
			{Path: "/usr", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Why: "@system (target of /bin)"},
		},
		Links: []contract.Link{{Path: "/bin", Target: "usr/bin"}, {Path: "/lib", Target: "usr/lib"}},
	}
}

func testInput(image bool) Input {
	run := "/run/cordon/runs/R"
	return Input{
		Plan: fixturePlan(),
		Host: sandbox.Host{
			RunID: "20260101T000000Z-abcdef", RunDir: run, Init: "/usr/local/bin/cordon",
			MaskFile: run + "/mask-file", MaskDir: run + "/mask-dir", ControlSocket: run + "/control.sock", ControlToken: "T",
			SecretFiles: []sandbox.SecretFile{{Name: "TOKEN", Value: secret.New("never in a golden file")}},
		},
		HostInitDir: run + "/init", UID: 1000, GID: 1000, Image: image,
	}
}

// golden compares got (as indented JSON) with testdata/name, or rewrites it.
func golden(t *testing.T, name string, got any) {
	t.Helper()
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, '\n')
	p := filepath.Join("testdata", name)
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
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, data)
	}
}

func TestMountsGolden(t *testing.T) {
	for _, c := range []struct {
		name  string
		image bool
	}{{"host_view", false}, {"image", true}} {
		t.Run(c.name, func(t *testing.T) {
			in := testInput(c.image)
			golden(t, "mounts_"+c.name+".golden", struct {
				Mounts   any
				Writable []string
				Links    []contract.Link
			}{Mounts(in), Writable(in, "/engine/rw"), Links(in)})
		})
	}
}

func TestImageLeavesOutTheHostSystem(t *testing.T) {
	var got []string
	for _, m := range Mounts(testInput(true)) {
		got = append(got, m.Destination)
	}
	for _, gone := range []string{"/etc", "/etc/shadow", "/etc/ssl/private", "/usr"} {
		if slices.Contains(got, gone) {
			t.Errorf("with an image, %s (from @system) must not be mounted; got %v", gone, got)
		}
	}
	for _, kept := range []string{"/home/dev", "/home/dev/proj", "/home/dev/proj/.env", "/home/dev/proj/.git", "/opt/data", "/tmp", InitDir, InitPath, sandbox.ControlPath} {
		if !slices.Contains(got, kept) {
			t.Errorf("with an image, %s must still be mounted; got %v", kept, got)
		}
	}
}

// TestSystemOriginIsNamed guards the one place this package reads the contract's
// provenance text: Compile names @system mounts "@system...".
func TestSystemOriginIsNamed(t *testing.T) {
	plan, err := contract.Compile(contract.Default(), contract.Host{Home: t.TempDir(), Cwd: t.TempDir(), Getenv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Plan: plan, Image: true}
	for _, m := range in.selected() {
		if m.Path == "/usr" || m.Path == "/etc" {
			t.Errorf("%s (why %q) survives with an image: the @system provenance text changed", m.Path, m.Why)
		}
	}
}

func TestArgvMatchesPid1(t *testing.T) {
	if a := Argv(); a[0] != InitPath || a[3] != "--dir" || a[4] != InitDir {
		t.Errorf("Argv() = %q", a)
	}
}

func TestName(t *testing.T) {
	if got := Name("20260101T000000Z-abcdef"); got != "cordon-20260101T000000Z-abcdef" {
		t.Errorf("Name: got %q", got)
	}
	if got := Name("a/b:c"); got != "cordon-a-b-c" {
		t.Errorf("Name: got %q", got)
	}
}

func TestSkeleton(t *testing.T) {
	if len(Skeleton(testInput(false))) == 0 {
		t.Fatal("empty skeleton")
	}
	first, second := Skeleton(testInput(false)), Skeleton(testInput(false))
	if string(first) != string(second) {
		t.Error("the skeleton must be reproducible: its digest names the image")
	}
}

// A writable source bound from its idmapped mount brings what the plan mounts inside
// it along: the workspace and its read-only .git come from the idmapped tree; paths
// outside it stay the host's.
func TestMountsFromIdmapped(t *testing.T) {
	in := testInput(false)
	in.Idmapped = map[string]string{"/home/dev/proj": "/run/cordon/runs/R/idmapped/0"}
	got := map[string]string{}
	for _, m := range Mounts(in) {
		got[m.Destination] = m.Source
	}
	for dst, src := range map[string]string{
		"/home/dev/proj":      "/run/cordon/runs/R/idmapped/0",
		"/home/dev/proj/.git": "/run/cordon/runs/R/idmapped/0/.git",
		"/home/dev/proj/.env": "/run/cordon/runs/R/mask-file",
		"/opt/data":           "/opt/data",
		"/usr":                "/usr",
	} {
		if got[dst] != src {
			t.Errorf("%s bound from %q; want %q", dst, got[dst], src)
		}
	}
}
