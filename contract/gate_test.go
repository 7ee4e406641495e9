package contract

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGatesCompile(t *testing.T) {
	dir := t.TempDir()
	c, err := Load("../examples/gates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.Workspace = Str{Value: dir}
	p, err := Compile(c, testHost(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Credentials) != 0 {
		t.Errorf("Plan.Credentials = %v; deliver: gate credentials must not be issued at start", p.Credentials)
	}
	if len(p.Gates) != 2 {
		t.Fatalf("got %d gates; want 2", len(p.Gates))
	}
	push, ok := p.Gate("push")
	if !ok {
		t.Fatal("no gate push")
	}
	if push.Approve != ApproveHuman || push.Timeout != Duration(5*time.Minute) || push.Why == "" {
		t.Errorf("push = %+v", push)
	}
	if push.Credential == nil || push.Credential.Name != "GITHUB_PUSH" || push.Credential.Deliver != DeliverGate {
		t.Errorf("push.Credential = %+v", push.Credential)
	}
	rel, _ := p.Gate("release")
	if rel.Approve != ApproveDeny || rel.Credential != nil || rel.Timeout != Duration(DefaultGateTimeout) {
		t.Errorf("release = %+v", rel)
	}
	if gc := p.GateCredentials(); len(gc) != 1 || gc[0].Name != "GITHUB_PUSH" {
		t.Errorf("GateCredentials = %+v", gc)
	}
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"gates":[{"name":"push","run":["git","push","origin","HEAD:refs/heads/agent/{{.Run}}"],"approve":"human"`) {
		t.Errorf("plan JSON lacks the gate: %s", js)
	}
}

func TestGateCredentialStaysOutOfStart(t *testing.T) {
	dir := t.TempDir()
	src := `version: 1
credentials:
  - {name: A, provider: local}
  - {name: B, provider: local, deliver: gate}
gates:
  - {name: g, run: ["true"], credential: B, why: test}
`
	c, err := Parse(filepath.Join(dir, "c.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(c, testHost(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Credentials) != 1 || p.Credentials[0].Name != "A" {
		t.Errorf("Plan.Credentials = %+v; want only A", p.Credentials)
	}
}

func TestGateArgv(t *testing.T) {
	tests := []struct {
		name string
		run  []string
		want []string
		err  string
	}{
		{"plain", []string{"git", "push"}, []string{"git", "push"}, ""},
		{"run", []string{"git", "push", "origin", "HEAD:refs/heads/agent/{{.Run}}"}, []string{"git", "push", "origin", "HEAD:refs/heads/agent/R-1"}, ""},
		{"twice", []string{"{{.Run}}-{{.Run}}"}, []string{"R-1-R-1"}, ""},
		{"no injection", []string{"echo", "{{.Run}}"}, []string{"echo", "R-1"}, ""},
		{"unknown field", []string{"{{.Branch}}"}, nil, "can't evaluate field Branch"},
		{"bad syntax", []string{"{{.Run"}, nil, "unclosed action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Gate{Name: "g", Run: tt.run}.Argv("R-1")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v; want %q", err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("Argv = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// A gate runs on the host with a credential: a program of the workspace is refused, and
// one that runs what the workspace holds is noted for the reviewer.
func TestGateProgramFromWorkspace(t *testing.T) {
	dir := realTempDir(t)
	_, err := compileIn(t, dir, "version: 1\ngates:\n  - {name: rel, run: [\"./release.sh\"], why: w}\n")
	if err == nil || !strings.Contains(err.Error(), "3:23: gates.run: \"./release.sh\" is a relative path") {
		t.Errorf("relative program: %v", err)
	}
	for _, run := range []string{`["git", "-C", ".", "push"]`, `["/usr/lib/git-core/git-fetch", "origin"]`, `["env", "git", "fetch"]`, `["nice", "git", "fetch"]`, `["xargs", "git"]`,
		`["setarch", "x86_64", "git", "fetch"]`, `["ssh-agent", "/usr/bin/git", "status"]`, `["sh", "-c", "cd x && git fetch"]`, `["scalar", "run", "all"]`} {
		if _, err := compileIn(t, dir, "version: 1\ngates:\n  - {name: tag, run: "+run+", why: w}\n"); err == nil || !strings.Contains(err.Error(), "git push") {
			t.Errorf("%s: %v", run, err)
		}
	}
	p, err := compileIn(t, dir, "version: 1\ngates:\n  - {name: rel, run: [\"make\", \"release\"], why: w}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "runs make on the host, which reads the Makefile") {
		t.Errorf("notes = %q", p.Notes)
	}
}
