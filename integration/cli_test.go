package integration

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestCheckExitCodes(t *testing.T) {
	w := newWorld(t)
	if r := w.cordon("", "check"); r.code != 0 || !strings.Contains(r.stdout, "built-in default contract: valid") {
		t.Errorf("built-in default: %v", r)
	}
	w.contract("version: 1\nfilesystem:\n  widen:\n    - {path: ~/.ssh, why: deploy keys for the test}\n")
	r := w.cordon("", "check")
	if r.code != 0 {
		t.Fatalf("a valid contract with a widening: %v", r)
	}
	assertContains(t, "check", r.stdout, "cordon.yaml:4:7: widening: "+w.home+"/.ssh is readable (deploy keys for the test)")
	w.contract("version: 1\nbogus: 1\ncommands: {timeout: 0s}\n")
	r = w.cordon("", "check")
	if r.code != 1 {
		t.Fatalf("invalid: want 1, got %v", r)
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 {
		t.Errorf("want one line per problem (2), got %q", r.stdout)
	}
	if r := w.cordon("", "check", "--nope"); r.code != 2 {
		t.Errorf("usage error: want 2, got %v", r)
	}
	if r := w.cordon("", "check", "-c", "/nonexistent.yaml"); r.code != 1 || !strings.Contains(r.stdout, "no such file") {
		t.Errorf("missing file: %v", r)
	}
}

func TestExplain(t *testing.T) {
	w := newWorld(t)
	r := w.cordon("", "explain", "--json")
	if r.code != 0 {
		t.Fatalf("explain --json: %v", r)
	}
	var out struct {
		Version int `json:"explain_version"`
		Plan    struct {
			Workspace string `json:"workspace"`
			Mounts    []struct {
				Path   string `json:"path"`
				Access string `json:"access"`
			} `json:"mounts"`
			Env []map[string]string `json:"env"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("explain --json is not JSON: %v\n%s", err, r.stdout)
	}
	if out.Version != 1 || out.Plan.Workspace != w.ws {
		t.Errorf("explain: %+v", out)
	}
	for _, e := range out.Plan.Env {
		if _, ok := e["value"]; ok {
			t.Errorf("explain must not print environment values: %v", e)
		}
	}
	r = w.cordon("", "explain")
	if !regexp.MustCompile(`(?m)^  rw +` + regexp.QuoteMeta(w.ws) + ` +filesystem\.writable \(default\)$`).MatchString(r.stdout) {
		t.Errorf("explain: the workspace row is missing:\n%s", r.stdout)
	}
	assertContains(t, "explain", r.stdout, w.ws+"/.git")
	assertContains(t, "explain", r.stdout, "Network: none")
}

func TestHelpAndVersion(t *testing.T) {
	w := newWorld(t)
	for _, cmd := range []string{"run", "check", "explain", "backends", "gc", "version"} {
		if r := w.cordon("", cmd, "--help"); r.code != 0 || !strings.Contains(r.stderr, "Usage: cordon "+cmd) {
			t.Errorf("%s --help: %v", cmd, r)
		}
	}
	if r := w.cordon("", "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "cordon ") {
		t.Errorf("version: %v", r)
	}
	if r := w.cordon("", "backends"); r.code != 0 || !regexp.MustCompile(`(?m)^bwrap +available`).MatchString(r.stdout) {
		t.Errorf("backends: %v", r)
	}
	if r := w.cordon("", "frobnicate"); r.code != 2 {
		t.Errorf("unknown command: want 2, got %v", r)
	}
}
