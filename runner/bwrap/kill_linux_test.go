package bwrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// TestExecRefusedEarlyLeavesNothing makes Ready refuse at moments spread over bwrap's
// set-up (its fork, the child waiting for its uid map, building the mount tree,
// process 1 waiting for its spec), which is when killing bwrap alone left its child
// running, holding the command's output: Exec hung in Wait. Exec must return the
// refusal promptly and leave no process of the sandbox, found by a marker in its
// environment. Each case runs alone in the cgroup (which the cgroup kill takes), as
// if with another Exec running (no cgroup kill), and without a cgroup (cordon not
// root).
func TestExecRefusedEarlyLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
	for _, mode := range []string{"alone", "other-exec", "no-cgroup"} {
		t.Run(mode, func(t *testing.T) {
			for i := range 12 {
				refuseEarly(t, mode, time.Duration(i*i)*500*time.Microsecond)
			}
			refuseEarly(t, mode, 300*time.Millisecond) // process 1 waits for its spec
		})
	}
}

var errRefused = errors.New("refused by the test")

func refuseEarly(t *testing.T, mode string, after time.Duration) {
	marker := fmt.Sprintf("CORDON_KILL_TEST=%d-%s-%d", os.Getpid(), mode, after)
	s := startForKill(t, marker)
	switch mode {
	case "other-exec":
		defer s.enter()()
	case "no-cgroup":
		cg := s.cg
		s.cg = nil
		defer cg.Remove()
	}
	var stdout, stderr syncBuffer // not files: Exec copies them through pipes
	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), sandbox.Process{
			Argv: []string{"true"}, Stdout: &stdout, Stderr: &stderr,
			Ready: func(context.Context) error {
				time.Sleep(after)
				return errRefused
			},
		})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errRefused) {
			t.Fatalf("refused after %v: Exec returned %v; want the refusal (stderr %q)", after, err, stderr.String())
		}
	case <-time.After(drainAfterKill / 2):
		// Only a survivor of the kill holds the output that long.
		left := withMarker(marker)
		killAll(left)
		if err := <-done; !errors.Is(err, errRefused) {
			t.Errorf("Exec returned %v; want the refusal", err)
		}
		t.Fatalf("refused after %v: Exec did not return in %v (sandbox processes %v)", after, drainAfterKill/2, left)
	}
	// The kernel ends a killed pid namespace's members right after its process 1.
	deadline := time.Now().Add(5 * time.Second)
	for left := withMarker(marker); len(left) > 0; left = withMarker(marker) {
		if time.Now().After(deadline) {
			killAll(left)
			t.Fatalf("refused after %v: processes of the sandbox outlived Exec: %v", after, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startForKill starts a run's sandbox (root's workspace, a leased uid) whose processes
// carry marker in their environment.
func startForKill(t *testing.T, marker string) *instance {
	dir := t.TempDir()
	plan := &contract.Plan{Workspace: dir, Workdir: dir, Mounts: []contract.Mount{
		{Path: dir, Type: contract.Bind, Access: contract.ReadWrite, Dir: true},
	}}
	run := t.TempDir()
	host := sandbox.Host{
		RunID:    "killtest-" + strconv.Itoa(os.Getpid()) + "-" + filepath.Base(run),
		RunDir:   run,
		Init:     filepath.Join(filepath.Dir(testutil.Cordon(t)), "cordon-init"),
		MaskFile: filepath.Join(run, "mask-file"),
		MaskDir:  filepath.Join(run, "mask-dir"),
		Env:      append(plan.Environ(), marker),
		UID:      leasedForTest,
	}
	if err := os.WriteFile(host.MaskFile, nil, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(host.MaskDir, 0); err != nil {
		t.Fatal(err)
	}
	sb, err := (&Backend{}).Start(context.Background(), plan, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	return sb.(*instance)
}

// withMarker lists the live processes whose environment holds marker (a zombie has
// none left).
func withMarker(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		env = append([]byte{0}, env...) // every entry between NULs, the first too
		if err == nil && bytes.Contains(env, []byte("\x00"+marker+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func killAll(pids []int) {
	for _, pid := range pids {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the copy's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
