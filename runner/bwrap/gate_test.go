package bwrap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner/bwrap"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// TestExecWaitsForGate: the runner takes a direct run's workspace baseline while bwrap
// starts, and the command must not run before the baseline is complete. Exec calls
// Process.Gate before the command runs (nothing exists yet when it is called), and a
// failing gate means the command never runs at all.
func TestExecWaitsForGate(t *testing.T) {
	testutil.RequireBwrap(t)
	init := filepath.Join(filepath.Dir(testutil.Cordon(t)), "cordon-init")
	ws := t.TempDir()
	if err := os.Mkdir(ws+"/.git", 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := contract.HostFromOS()
	if err != nil {
		t.Fatal(err)
	}
	h.Cwd = ws
	plan, err := contract.Compile(contract.Default(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range plan.Mounts { // as the runner does before a sandbox starts
		if _, err := os.Lstat(m.Path); m.Create == contract.NoPlaceholder || err == nil {
			continue
		}
		if err := linux.MakePlaceholder(m.Path, m.Create == contract.PlaceholderDir, m.Content); err != nil {
			t.Fatal(err)
		}
	}
	run := t.TempDir()
	host := sandbox.Host{RunID: fmt.Sprintf("gate-test-%d", os.Getpid()), RunDir: run, Init: init,
		MaskFile: filepath.Join(run, "mask-file"), MaskDir: filepath.Join(run, "mask-dir")}
	if err := os.WriteFile(host.MaskFile, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(host.MaskDir, 0); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var backend bwrap.Backend
	sb, err := backend.Start(ctx, plan, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	if g, ok := sb.(sandbox.Gated); !ok || !g.Gated() {
		t.Fatal("the bwrap sandbox does not honour Process.Gate")
	}
	ran := filepath.Join(ws, "ran")
	argv := []string{"sh", "-c", "echo ran > ran"}

	refused := errors.New("baseline failed")
	if _, err := sb.Exec(ctx, sandbox.Process{Argv: argv, Gate: func() error { return refused }}); !errors.Is(err, refused) {
		t.Fatalf("exec with a failing gate: %v, want the gate's error", err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran although its gate failed (%v)", err)
	}

	var early error
	gate := func() error {
		if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
			early = fmt.Errorf("the command ran before its gate was called (%v)", err)
		}
		return nil
	}
	code, err := sb.Exec(ctx, sandbox.Process{Argv: argv, Gate: gate})
	if err != nil || code != 0 {
		t.Fatalf("exec: %d %v", code, err)
	}
	if early != nil {
		t.Fatal(early)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the command did not run after its gate: %v", err)
	}
}
