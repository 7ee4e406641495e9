package bwrap_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/bwrap"
)

func startSession(t testing.TB) (*runner.Session, string) {
	testutil.RequireBwrap(t)
	init := filepath.Join(filepath.Dir(testutil.Cordon(t)), "cordon-init")
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/.git", 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := contract.HostFromOS()
	if err != nil {
		t.Fatal(err)
	}
	h.Cwd = dir
	plan, err := contract.Compile(contract.Default(), h)
	if err != nil {
		t.Fatal(err)
	}
	s, err := runner.StartSession(context.Background(), plan, runner.Options{Backend: &bwrap.Backend{}, Init: init, AuditRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, dir
}

func TestSessionExecs(t *testing.T) {
	s, dir := startSession(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	res, err := s.Exec(ctx, []string{"sh", "-c", "echo one > f; cat f"}, runner.ExecOptions{Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 || out.String() != "one\n" {
		t.Fatalf("first exec: %v %+v %q %q", err, res, out.String(), errb.String())
	}
	out.Reset()
	res, err = s.Exec(ctx, []string{"cat", "f"}, runner.ExecOptions{Stdout: &out, Stderr: &errb})
	if err != nil || res.ExitCode != 0 || out.String() != "one\n" {
		t.Fatalf("second exec: %v %+v %q %q", err, res, out.String(), errb.String())
	}
	res, err = s.Exec(ctx, []string{"sleep", "5"}, runner.ExecOptions{Timeout: 200 * time.Millisecond})
	if err != nil || res.ExitCode != 124 {
		t.Fatalf("timeout exec: %v %+v", err, res)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Exec(ctx, []string{"sh", "-c", "sleep 0.2; echo x > c" + string(rune('0'+i))}, runner.ExecOptions{})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("concurrent exec %d: %v %+v", i, err, res)
			}
		}()
	}
	wg.Wait()
	for i := range 4 {
		if _, err := os.Stat(filepath.Join(dir, "c"+string(rune('0'+i)))); err != nil {
			t.Error(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, []string{"true"}, runner.ExecOptions{}); err == nil {
		t.Fatal("exec after close succeeded")
	}
}

// BenchmarkSessionExecTrue is a warm `cordon exec -- true` without the CLI's process
// start and socket hop: cmd.start, the command through process 1's control channel,
// cmd.end and the workspace diff.
func BenchmarkSessionExecTrue(b *testing.B) {
	s, _ := startSession(b)
	for b.Loop() {
		res, err := s.Exec(context.Background(), []string{"true"}, runner.ExecOptions{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
}
