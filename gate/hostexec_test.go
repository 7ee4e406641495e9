package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/hostexec"
)

// TestExecuteRefusesSandboxWritableProgram: a gate's program checked at run start can
// be changed before a person approves; execute checks it again and refuses one that
// lies where the sandbox can write, without running it.
func TestExecuteRefusesSandboxWritableProgram(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(root, "ran")
	prog := filepath.Join(ws, "publish")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := hostexec.Policy{Untrusted: []string{ws}, Invoker: -1}
	out, _, _ := execute(context.Background(), pol, ws, []string{prog}, []string{"PATH=" + pathEnv})
	if out.ExitCode != exitCannotRun || !strings.Contains(out.Output, "not a program the host may run") {
		t.Fatalf("execute of a program in the workspace: exit %d, %q; want %d and a refusal", out.ExitCode, out.Output, exitCannotRun)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused program ran")
	}
	// The same program outside the workspace runs.
	pol.Untrusted = nil
	if out, _, _ := execute(context.Background(), pol, ws, []string{prog}, []string{"PATH=" + pathEnv}); out.ExitCode != 0 {
		t.Fatalf("execute of a trusted program: exit %d, %q", out.ExitCode, out.Output)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the trusted program did not run")
	}
}
