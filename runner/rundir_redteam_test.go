package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
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

// killedBeforeMaking leaves, under root, the record of a run whose cordon recorded the
// placeholders of plan and was killed before it made any.
func killedBeforeMaking(t *testing.T, root string, plan *contract.Plan) *runDir {
	t.Helper()
	rd, _, err := makeRunDir(root, "run-killed", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.placeholders(plan, func() error { return errors.New("killed here") }); err == nil {
		t.Fatal("setup: check did not stop the run")
	}
	rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // its cordon is gone
	if err := rd.save(); err != nil {
		t.Fatal(err)
	}
	return rd
}

// TestUsersDirsAtUnmadeParentsAreSpared: a run recorded the missing parents a and a/b
// of its placeholder a/b/secret and was killed before it made them. The user then
// makes a/b, empty, of their own. A run that starts before gc, makes its own
// a/b/secret and ends must not take a/b (nor a) for the dead run's parents it keeps
// alive, and neither must gc: both stay, empty as the user made them.
func TestUsersDirsAtUnmadeParentsAreSpared(t *testing.T) {
	ws := t.TempDir()
	a, ab := filepath.Join(ws, "a"), filepath.Join(ws, "a", "b")
	secret := filepath.Join(ab, "secret")
	root := filepath.Join(t.TempDir(), "runs")
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: secret, Create: contract.PlaceholderFile}}}
	dead := killedBeforeMaking(t, root, plan)
	if !slices.Equal(dead.owner.Parents, []string{a, ab}) {
		t.Fatalf("setup: parents recorded %v, want [%s %s]", dead.owner.Parents, a, ab)
	}
	if err := os.MkdirAll(ab, 0o755); err != nil { // the user's own
		t.Fatal(err)
	}
	next, _, err := makeRunDir(root, "run-next", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	if len(next.owner.Parents)+len(next.owner.AdoptedIDs) != 0 {
		t.Errorf("the next run took the user's directories for a dead run's parents: parents %v, adopted %v", next.owner.Parents, next.owner.AdoptedIDs)
	}
	if err := next.remove(); err != nil {
		t.Logf("remove: %v", err)
	}
	if _, err := os.Lstat(secret); err == nil {
		t.Error("the next run left the placeholder it made")
	}
	if _, err := os.Lstat(ab); err != nil {
		t.Fatalf("the next run removed the user's empty directory %s", ab)
	}
	if _, err := GC(root); err != nil {
		t.Logf("gc: %v", err)
	}
	for _, d := range []string{ab, a} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("gc removed the user's empty directory %s, which the dead run had only recorded", d)
		}
	}
}

// TestUsersFileAfterReleaseIsSpared: a run removed its .env placeholder at its end and
// was killed before its run directory went: its record still names .env, and its made
// record the placeholder's identity. The user
// then creates an empty .env of their own. Neither a run that starts meanwhile nor gc
// may take it for the placeholder.
func TestUsersFileAfterReleaseIsSpared(t *testing.T) {
	ws := t.TempDir()
	env := filepath.Join(ws, ".env")
	root := filepath.Join(t.TempDir(), "runs")
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: env, Create: contract.PlaceholderFile}}}
	rd := sharedRuns(t, root, plan, 1)[0]
	// Killed in its release, right after its placeholders went: its record, and the
	// identities it made, are still there.
	if err := rd.removePlaceholders(); err != nil {
		t.Fatal(err)
	}
	rd.owner.PID, rd.owner.Start = 1<<22+1, 42
	if err := rd.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(env); err == nil {
		t.Fatal("setup: the placeholder was not removed")
	}
	if err := os.WriteFile(env, nil, 0o600); err != nil { // the user's own
		t.Fatal(err)
	}
	if Placeholder(root, env) {
		t.Error("the user's empty .env passes for a placeholder")
	}
	next, _, err := makeRunDir(root, "run-next", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.placeholders(&contract.Plan{Mounts: []contract.Mount{{Path: env}}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(next.owner.Adopted) != 0 {
		t.Errorf("the next run adopted the user's .env: %v", next.owner.Adopted)
	}
	if _, err := GC(root); err != nil {
		t.Logf("gc: %v", err)
	}
	if _, err := os.Lstat(env); err != nil {
		t.Fatal("gc removed the user's empty .env, made after the dead run had removed its placeholder")
	}
	if err := next.remove(); err != nil {
		t.Logf("remove: %v", err)
	}
	if _, err := os.Lstat(env); err != nil {
		t.Error("the next run removed the user's empty .env")
	}
}

// TestReplacedPlaceholderIsTheUsers: during a run the user replaces its .env
// placeholder with an empty file of their own (rm, touch). A second run must not
// adopt it, and neither run may remove it.
func TestReplacedPlaceholderIsTheUsers(t *testing.T) {
	ws := t.TempDir()
	env := filepath.Join(ws, ".env")
	root := filepath.Join(t.TempDir(), "runs")
	first := sharedRuns(t, root, &contract.Plan{Mounts: []contract.Mount{{Path: env, Create: contract.PlaceholderFile}}}, 1)[0]
	if err := os.Remove(env); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, nil, 0o600); err != nil { // the user's own
		t.Fatal(err)
	}
	second, _, err := makeRunDir(root, "run-second", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.placeholders(&contract.Plan{Mounts: []contract.Mount{{Path: env}}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(second.owner.Adopted) != 0 {
		t.Errorf("the second run adopted the user's .env: %v", second.owner.Adopted)
	}
	for _, rd := range []*runDir{first, second} {
		if err := rd.remove(); err != nil {
			t.Logf("remove: %v", err)
		}
		if _, err := os.Lstat(env); err != nil {
			t.Fatalf("run %s removed the user's empty .env", rd.id())
		}
	}
}

// TestUnmadeListingKeepsNothing: a live run recorded .env and made nothing (refused
// by its check, still tearing down). A second run makes .env: when it ends, the first
// run's record, naming .env with no identity, must not keep the second's placeholder
// in place for ever (no run would ever remove it).
func TestUnmadeListingKeepsNothing(t *testing.T) {
	ws := t.TempDir()
	env := filepath.Join(ws, ".env")
	root := filepath.Join(t.TempDir(), "runs")
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: env, Create: contract.PlaceholderFile}}}
	refused, _, err := makeRunDir(root, "run-refused", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := refused.placeholders(plan, func() error { return errors.New("refused") }); err == nil {
		t.Fatal("setup: check did not stop the run")
	}
	second := sharedRuns(t, root, plan, 1)[0]
	if !slices.Equal(second.owner.Created, []string{env}) {
		t.Fatalf("setup: the second run created %v", second.owner.Created)
	}
	if err := second.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(env); err == nil {
		t.Error("the second run's placeholder was kept for a run that never made nor adopted it")
	}
}

// TestKilledWhileMakingPlaceholdersLeavesNothing (the crash window): a cordon killed
// at any step of making its placeholders (each level's entries made aside, then
// recorded, then placed) leaves at a placeholder's path only what its record proves
// it made, and gc leaves the workspace as it was: no unrecorded placeholder, nothing
// aside. Every step of every level is tried, a run killed at each.
func TestKilledWhileMakingPlaceholdersLeavesNothing(t *testing.T) {
	errKilled := errors.New("killed here")
	for kill := 0; ; kill++ {
		ws := t.TempDir()
		mustWriteFile(t, filepath.Join(ws, "README"), "the user's\n")
		root := filepath.Join(t.TempDir(), "runs")
		rd, _, err := makeRunDir(root, "run-killed", ws, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		plan := &contract.Plan{Mounts: []contract.Mount{
			{Path: filepath.Join(ws, ".env"), Create: contract.PlaceholderFile},
			{Path: filepath.Join(ws, ".envrc"), Create: contract.PlaceholderFile, Content: "# cordon\n"},
			{Path: filepath.Join(ws, "cordon.yaml"), Create: contract.PlaceholderDir},
			{Path: filepath.Join(ws, ".vscode", "tasks.json"), Create: contract.PlaceholderFile},
			{Path: filepath.Join(ws, "a", "b", "secret"), Create: contract.PlaceholderDir},
		}}
		// A SIGKILL leaves the made record as it was at the step: what the run does
		// after the hook's error (it records what it made) is undone.
		steps, record := 0, []byte(nil)
		rd.stepHook = func(string) error {
			if steps++; steps > kill {
				record, _ = os.ReadFile(filepath.Join(rd.path, madeRecord))
				return errKilled
			}
			return nil
		}
		err = rd.placeholders(plan, nil)
		if record == nil {
			os.Remove(filepath.Join(rd.path, madeRecord))
		} else {
			mustWriteFile(t, filepath.Join(rd.path, madeRecord), string(record))
		}
		if err == nil {
			if kill < 4 {
				t.Fatalf("the run made its placeholders after %d steps; want levels of two steps each", kill)
			}
			return // every step was tried
		}
		if !errors.Is(err, errKilled) {
			t.Fatalf("kill at step %d: %v", kill, err)
		}
		// What is at a placeholder's path is one the record proves the run made.
		made := readMade(rd.path)
		for _, m := range plan.Mounts {
			for p := m.Path; p != ws; p = filepath.Dir(p) {
				if _, err := os.Lstat(p); err != nil {
					continue
				}
				if id, ok := made[p]; !ok || !identical(t, p, id) {
					t.Errorf("kill at step %d: %s is there with no record that the run made it", kill, p)
				}
			}
		}
		rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // its cordon is gone
		if err := rd.save(); err != nil {
			t.Fatal(err)
		}
		if _, err := GC(root); err != nil {
			t.Errorf("kill at step %d: gc: %v", kill, err)
		}
		if ents, _ := os.ReadDir(ws); len(ents) != 1 || ents[0].Name() != "README" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("kill at step %d: after gc the workspace holds %q, want only README", kill, names)
		}
	}
}

// identical says whether the entry at p has the identity id.
func identical(t *testing.T, p string, id linux.FileID) bool {
	t.Helper()
	got, err := linux.Identify(p)
	return err == nil && got == id
}

func mustWriteFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
