package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/contract"
)

// TestGCSparesUsersFileAtUnmadePlaceholder (red team): a run records its placeholders
// before it makes them; its cordon is killed in between (here: check fails and the
// record stays, as a SIGKILL leaves it). The user then creates an empty .env of their
// own (`touch .env`). No run made that file: gc must not remove it.
func TestGCSparesUsersFileAtUnmadePlaceholder(t *testing.T) {
	ws := t.TempDir()
	env := filepath.Join(ws, ".env")
	root := filepath.Join(t.TempDir(), "runs")
	rd, _, err := makeRunDir(root, "run-killed", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: env, Create: contract.PlaceholderFile}}}
	if err := rd.placeholders(plan, func() error { return errors.New("killed here") }); err == nil {
		t.Fatal("setup: check did not stop the run")
	}
	if exists := func() bool { _, err := os.Lstat(env); return err == nil }(); exists {
		t.Fatal("setup: the placeholder was made")
	}
	rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // its cordon is gone
	if err := rd.save(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, nil, 0o600); err != nil { // the user's own
		t.Fatal(err)
	}
	if _, err := GC(root); err != nil {
		t.Logf("gc: %v", err)
	}
	if _, err := os.Lstat(env); err != nil {
		t.Error("gc removed the user's empty .env, which no run made (a dead run had only recorded it)")
	}
}

// TestRunSparesUsersFileAtUnmadePlaceholder (red team): as
// TestGCSparesUsersFileAtUnmadePlaceholder, but before gc a new run starts: it finds
// the user's empty .env listed in the dead run's record and adopts it, and removes it
// when it ends.
func TestRunSparesUsersFileAtUnmadePlaceholder(t *testing.T) {
	ws := t.TempDir()
	env := filepath.Join(ws, ".env")
	root := filepath.Join(t.TempDir(), "runs")
	rd, _, err := makeRunDir(root, "run-killed", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: env, Create: contract.PlaceholderFile}}}
	if err := rd.placeholders(plan, func() error { return errors.New("killed here") }); err == nil {
		t.Fatal("setup: check did not stop the run")
	}
	rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // its cordon is gone
	if err := rd.save(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, nil, 0o600); err != nil { // the user's own
		t.Fatal(err)
	}
	// The next run compiled with .env present: it asks for no placeholder there.
	next, _, err := makeRunDir(root, "run-next", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.placeholders(&contract.Plan{Mounts: []contract.Mount{{Path: env}}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := next.remove(); err != nil {
		t.Logf("remove: %v", err)
	}
	if _, err := os.Lstat(env); err != nil {
		t.Errorf("the next run removed the user's empty .env (adopted %v)", next.owner.Adopted)
	}
}
