package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedHostProgramRewrite is the attack of issue 34 §1 through the real binary: a
// credential provider's mint command (or its interpreter) lies where a sandbox can
// write; run 1 rewrites it to leave a marker outside the workspace; run 2, whose
// contract names it, must refuse (125) rather than run it on the host. cordon check
// refuses the contract at the credential's entry. A second contract run 1 uses names
// no credential, so the rewrite itself is allowed: the refusal must come from the
// check of the program, not from run 1 failing.
func TestRedHostProgramRewrite(t *testing.T) {
	honest := "#!/bin/sh\necho '{\"token\": \"t0k\", \"id\": \"i1\", \"expires_at\": \"2099-01-01T00:00:00Z\"}'\n"
	cases := []struct {
		name string
		// setup writes what run 2's contract names; it returns the mint command, the
		// file run 1 rewrites (relative to the workspace, or absolute) and the extra
		// writable path, if any.
		setup func(w *world, root string) (mint, target, extra string)
	}{
		{"in the workspace", func(w *world, root string) (string, string, string) {
			p := filepath.Join(w.ws, "tools", "mint")
			writeExec(t, p, honest)
			return p, p, ""
		}},
		{"in a writable extra path", func(w *world, root string) (string, string, string) {
			extra := filepath.Join(root, "cache")
			p := filepath.Join(extra, "mint")
			writeExec(t, p, honest)
			return p, p, extra
		}},
		{"interpreter in the workspace", func(w *world, root string) (string, string, string) {
			interp := filepath.Join(w.ws, "tools", "interp")
			writeExec(t, interp, "#!/bin/sh\nexec /bin/sh \"$@\"\n")
			p := filepath.Join(root, "bin", "mint")
			writeExec(t, p, "#!"+interp+"\necho '{\"token\": \"t0k\", \"id\": \"i1\", \"expires_at\": \"2099-01-01T00:00:00Z\"}'\n")
			return p, interp, ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			root := filepath.Dir(w.ws)
			if err := os.Chmod(root, 0o755); err != nil {
				t.Fatal(err)
			}
			mint, target, extra := c.setup(w, root)
			marker := filepath.Join(root, "ran-on-the-host")
			writable := `"."`
			if extra != "" {
				writable += `, "` + extra + `"`
			}
			plain := filepath.Join(w.ws, "plain.yaml")
			mustWrite(t, plain, "version: 1\nfilesystem:\n  writable: ["+writable+"]\n")
			withCred := filepath.Join(w.ws, "cred.yaml")
			mustWrite(t, withCred, "version: 1\nfilesystem:\n  writable: ["+writable+"]\n"+
				"credentials:\n  - name: TOK\n    provider: exec\n    ttl: 10m\n    why: t\n"+
				"    scope: {mint: ["+mint+"], revoke: [/bin/true]}\n")

			chk := w.cordon("", "check", "-c", withCred)
			if chk.code != 1 || !strings.Contains(chk.stdout, withCred+":5:5: credentials TOK: scope.mint") ||
				!strings.Contains(chk.stdout, "not a program the host may run") {
				t.Errorf("cordon check of a contract whose mint command the sandbox can write: %s; want exit 1 at the credential's entry", chk)
			}

			// Run 1: the sandbox rewrites the program.
			evil := "#!/bin/sh\ntouch " + marker + "\necho '{\"token\": \"x\", \"id\": \"i\", \"expires_at\": \"2099-01-01T00:00:00Z\"}'\n"
			rewriteFromSandbox(t, w, plain, target, evil)

			// Run 2: names the rewritten program; it must not run on the host.
			r2 := w.cordon("", "run", "-c", withCred, "--", "true")
			if r2.code != 125 || !strings.Contains(r2.stderr, "not a program the host may run") {
				t.Errorf("run 2: %s; want exit 125 refusing the program", r2)
			}
			if lines := strings.Count(strings.TrimSpace(r2.stderr), "\n"); lines != 0 {
				t.Errorf("run 2's refusal is %d lines; want one:\n%s", lines+1, r2.stderr)
			}
			assertAbsent(t, marker)
		})
	}
}

// TestGateProgramInWorkspaceRefused: a gate whose program lies in the workspace is
// refused by cordon check at the gate's entry, and cordon explain lists the host
// programs of a contract it accepts with why each may run.
func TestGateProgramInWorkspaceRefused(t *testing.T) {
	w := newWorld(t)
	if err := os.Chmod(filepath.Dir(w.ws), 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(w.ws, "publish")
	writeExec(t, prog, "#!/bin/sh\necho published\n")
	w.contract("version: 1\ngates:\n  - name: pub\n    run: [" + prog + "]\n    why: t\n")
	chk := w.cordon("", "check")
	if chk.code != 1 || !strings.Contains(chk.stdout, "cordon.yaml:3:5: gate pub: "+prog) {
		t.Fatalf("cordon check: %s; want exit 1 at the gate's entry", chk)
	}
	w.contract("version: 1\ngates:\n  - name: pub\n    run: [ls, -l]\n    why: t\n")
	ex := w.cordon("", "explain")
	if ex.code != 0 {
		t.Fatalf("cordon explain: %s", ex)
	}
	assertContains(t, "cordon explain", ex.stdout, "gate pub: ls -> /")
	assertContains(t, "cordon explain", ex.stdout, "owned by root, not writable by group or others")
}

// TestRedGateProgramRewrite: the attack of TestRedHostProgramRewrite on a gate's
// program: it lies in a writable extra path, run 1 rewrites it to leave a marker on
// the host, and run 2, whose contract names it as a gate's program, is refused (125)
// before anything runs, so no approval can ever run the rewritten program.
func TestRedGateProgramRewrite(t *testing.T) {
	w := newWorld(t)
	root := filepath.Dir(w.ws)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(root, "cache")
	prog := filepath.Join(extra, "publish")
	writeExec(t, prog, "#!/bin/sh\necho published\n")
	marker := filepath.Join(root, "ran-on-the-host")
	plain := filepath.Join(w.ws, "plain.yaml")
	mustWrite(t, plain, "version: 1\nfilesystem:\n  writable: [\".\", \""+extra+"\"]\n")
	withGate := filepath.Join(w.ws, "gate.yaml")
	mustWrite(t, withGate, "version: 1\nfilesystem:\n  writable: [\".\", \""+extra+"\"]\n"+
		"gates:\n  - name: pub\n    run: ["+prog+"]\n    why: t\n")
	evil := "#!/bin/sh\ntouch " + marker + "\n"
	rewriteFromSandbox(t, w, plain, prog, evil)
	r2 := w.cordon("", "run", "-c", withGate, "--", "true")
	if r2.code != 125 || !strings.Contains(r2.stderr, "not a program the host may run") {
		t.Errorf("run 2: %s; want exit 125 refusing the gate's program", r2)
	}
	assertAbsent(t, marker)
}

// rewriteFromSandbox is run 1 of the rewrite attacks: a run under the contract plain
// writes content to target, which it may; the attack's precondition is checked.
func rewriteFromSandbox(t *testing.T, w *world, plain, target, content string) {
	t.Helper()
	r1 := w.cordon("", "run", "-c", plain, "--", "sh", "-c", `printf '%s' "$1" > "$2"`, "sh", content, target)
	if r1.code != 0 {
		t.Fatalf("run 1 (the rewrite): %s", r1)
	}
	if got, _ := os.ReadFile(target); string(got) != content {
		t.Fatalf("run 1 did not rewrite %s (the attack's precondition): %q", target, got)
	}
}

func writeExec(t *testing.T, p, content string) {
	t.Helper()
	mustWrite(t, p, content)
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestContainerHostProgramRewrite is TestRedHostProgramRewrite on every container
// backend: run 1 rewrites the program from inside a container.
func TestContainerHostProgramRewrite(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) { TestRedHostProgramRewrite(t) })
}

// TestHostExecutedFilesProtected: what tools on the host run later (direnv's .envrc,
// editor tasks, agent hooks, MCP servers) cannot be planted or changed by default; a
// widen entry with a why releases one.
func TestHostExecutedFilesProtected(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, ".envrc"), "export A=1\n")
	r := w.sh("for f in .envrc .mcp.json .vscode/tasks.json .claude/settings.json .idea/workspace.xml .gitmodules; do " +
		"mkdir -p $(dirname $f) 2>/dev/null; echo evil >> $f 2>/dev/null && echo planted $f; done; echo done")
	assertContains(t, "ran", r.stdout, "done")
	if strings.Contains(r.stdout, "planted") {
		t.Fatalf("a host-executed file was planted: %v", r)
	}
	if data, _ := os.ReadFile(filepath.Join(w.ws, ".envrc")); string(data) != "export A=1\n" {
		t.Fatalf(".envrc changed: %q", data)
	}
	for _, f := range []string{".mcp.json", ".vscode", ".claude", ".gitmodules"} {
		if _, err := os.Lstat(filepath.Join(w.ws, f)); err == nil {
			t.Errorf("%s was left in the workspace", f)
		}
	}
	mustMkdir(t, filepath.Join(w.ws, ".vscode"))
	w.contract("version: 1\nfilesystem:\n  widen:\n    - {path: .vscode, access: write, why: the agent edits launch configs}\n")
	r = w.sh("echo '{}' > .vscode/launch.json && echo wrote")
	assertContains(t, "widened", r.stdout, "wrote")
	e := w.cordon("", "explain")
	assertContains(t, "explain lists the protection", e.stdout, ".envrc")
}
