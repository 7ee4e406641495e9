package bwrap_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/bwrap"
)

// BenchmarkRunTrue is `cordon run -- true` without the CLI's process start: compile the
// default contract, prepare the run, start bwrap with pid1, run true, tear down.
func BenchmarkRunTrue(b *testing.B) {
	testutil.RequireBwrap(b)
	init := filepath.Join(filepath.Dir(testutil.Cordon(b)), "cordon-init")
	dir := b.TempDir()
	if err := os.Mkdir(dir+"/.git", 0o755); err != nil {
		b.Fatal(err)
	}
	h, err := contract.HostFromOS()
	if err != nil {
		b.Fatal(err)
	}
	h.Cwd = dir
	for b.Loop() {
		plan, err := contract.Compile(contract.Default(), h)
		if err != nil {
			b.Fatal(err)
		}
		res, err := runner.Run(context.Background(), plan, []string{"true"}, runner.Options{Backend: &bwrap.Backend{}, Init: init})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
}
