package runner

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
	sessionwire "github.com/cordonhq/cordon/session/wire"
)

func TestPlaceholdersAreRemovedAfterTheRunAndByGC(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	ws := t.TempDir()
	plan := &contract.Plan{Mounts: []contract.Mount{
		{Path: filepath.Join(ws, ".git"), Create: contract.PlaceholderDir},
		{Path: filepath.Join(ws, ".env"), Create: contract.PlaceholderFile},
	}}
	rd, host, err := makeRunDir(root, "run-a", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{host.MaskFile, host.MaskDir} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0 {
			t.Errorf("mask %s: %v %v", p, st, err)
		}
	}
	if err := rd.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range plan.Mounts {
		if _, err := os.Lstat(m.Path); err != nil {
			t.Errorf("placeholder %s not created: %v", m.Path, err)
		}
	}
	if err := rd.remove(); err != nil {
		t.Fatal(err)
	}
	for _, m := range plan.Mounts {
		if _, err := os.Lstat(m.Path); err == nil {
			t.Errorf("placeholder %s left behind", m.Path)
		}
	}

	// A crashed run: its owner pid is gone; gc cleans it, a live one it leaves alone.
	rd, _, err = makeRunDir(root, "run-b", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // no such process
	if err := rd.save(); err != nil {
		t.Fatal(err)
	}
	live, _, err := makeRunDir(root, "run-c", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := live.placeholders(&contract.Plan{}, nil); err != nil { // its record, naming none
		t.Fatal(err)
	}
	cleaned, err := GC(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cleaned) != 1 || cleaned[0] != "run-b" {
		t.Errorf("gc cleaned %v; want [run-b]", cleaned)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git")); err == nil {
		t.Error("gc left the crashed run's placeholder")
	}
	if _, err := os.Stat(live.path); err != nil {
		t.Errorf("gc removed a live run: %v", err)
	}
	data, _ := os.ReadFile(filepath.Join(live.path, "owner.json"))
	var o runOwner
	if json.Unmarshal(data, &o) != nil || o.PID != os.Getpid() {
		t.Errorf("owner.json: %s", data)
	}
}

func TestPlaceholderThatGainedContentIsKept(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, ".env")
	rd, _, err := makeRunDir(filepath.Join(t.TempDir(), "runs"), "run", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.placeholders(&contract.Plan{Mounts: []contract.Mount{{Path: p, Create: contract.PlaceholderFile}}}, nil); err != nil {
		t.Fatal(err)
	}
	// Someone on the host wrote real content there meanwhile: never delete data.
	if err := os.WriteFile(p, []byte("DB=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rd.remove(); err == nil {
		t.Error("want an error naming the kept placeholder")
	}
	if data, _ := os.ReadFile(p); string(data) != "DB=1\n" {
		t.Errorf("content lost: %q", data)
	}
}

// TestGCSealsTheLogOfADeadRun: a run whose cordon died before its seal has its log
// sealed by gc, with the reason, and verifies; a live run's log is left open.
func TestGCSealsTheLogOfADeadRun(t *testing.T) {
	root, logs := filepath.Join(t.TempDir(), "runs"), t.TempDir()
	open := func(id string, dead bool) string {
		w, err := audit.Create(logs, id, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.StartCmd(audit.CmdStart{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		rd, _, err := makeRunDir(root, id, "", w.Dir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := rd.placeholders(&contract.Plan{}, nil); err != nil {
			t.Fatal(err)
		}
		if dead {
			rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // no such process
			if err := rd.save(); err != nil {
				t.Fatal(err)
			}
		}
		return w.Path()
	}
	dead, live := open(audit.NewRunID(time.Now()), true), open(audit.NewRunID(time.Now()), false)
	if _, err := GC(root); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(dead)
	if err != nil || !rep.Sealed || rep.Lines != 3 {
		t.Fatalf("the dead run's log: %+v, %v; want 3 lines, sealed", rep, err)
	}
	data, _ := os.ReadFile(dead)
	if !strings.Contains(string(data), AbandonedDetail) || !strings.Contains(string(data), `"commands":1`) {
		t.Errorf("the seal does not say why: %s", data)
	}
	if _, err := audit.Verify(live); !errors.Is(err, audit.ErrTruncated) {
		t.Errorf("the live run's log: %v; want it left unsealed", err)
	}
}

// TestPlaceholdersRecordedBeforeTheCheck: the owner record is written once, before
// the check (a run stopped there), naming every placeholder; a refused
// run makes none, and its teardown removes nothing it did not make (an empty file
// another run made at one of its paths since is that run's).
func TestPlaceholdersRecordedBeforeTheCheck(t *testing.T) {
	root, ws := filepath.Join(t.TempDir(), "runs"), t.TempDir()
	p1, p2 := filepath.Join(ws, ".env"), filepath.Join(ws, ".envrc")
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: p1, Create: contract.PlaceholderFile}, {Path: p2, Create: contract.PlaceholderFile}}}
	rd, _, err := makeRunDir(root, "run", ws, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readOwner(rd.path); err == nil {
		t.Fatal("an owner record before placeholders wrote it")
	}
	refused := errors.New("refused")
	err = rd.placeholders(plan, func() error {
		o, err := readOwner(rd.path)
		if err != nil || strings.Join(o.Created, " ") != p1+" "+p2 {
			t.Errorf("the record when the check runs: %+v, %v", o, err)
		}
		if _, err := os.Lstat(p1); err == nil {
			t.Error("a placeholder made before the check")
		}
		if err := os.WriteFile(p1, nil, 0o600); err != nil { // another run's, made meanwhile
			t.Fatal(err)
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("the check's error: %v", err)
	}
	if _, err := os.Lstat(p2); err == nil {
		t.Error("a placeholder made after the check refused")
	}
	if err := rd.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p1); err != nil {
		t.Errorf("the run removed an empty file it never made: %v", err)
	}
}

// StartGC removes what a dead run left before it returns (a compile that follows must
// not take its placeholders for real paths) and what a dead session left by the time
// its wait returns, which names both.
func TestStartGCCleansDeadRunsFirst(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	ws := t.TempDir()
	p := filepath.Join(ws, ".env")
	rd, _, err := makeRunDir(root, "run-dead", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.placeholders(&contract.Plan{Mounts: []contract.Mount{{Path: p, Create: contract.PlaceholderFile}}}, nil); err != nil {
		t.Fatal(err)
	}
	rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // no such process
	if err := rd.save(); err != nil {
		t.Fatal(err)
	}
	rt := paths.Root(root)
	if err := os.Mkdir(rt.Sessions(), 0o700); err != nil {
		t.Fatal(err)
	}
	si := sessionwire.Info{ID: "session-dead", Process: owner.Process{PID: 1<<22 + 1, Start: 42}}
	data, _ := json.Marshal(si)
	if err := os.WriteFile(rt.SessionInfo(si.ID), data, 0o600); err != nil {
		t.Fatal(err)
	}
	wait := StartGC(root)
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("the dead run's placeholder is still there when StartGC returns: %v", err)
	}
	cleaned, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cleaned, []string{"run-dead", "session-dead"}) {
		t.Errorf("cleaned %v; want the dead run and the dead session", cleaned)
	}
	if _, err := os.Lstat(rt.SessionInfo(si.ID)); !os.IsNotExist(err) {
		t.Errorf("the dead session's record is left: %v", err)
	}
}

// sharedRuns makes n run directories under one run root, each with the placeholders
// plan asks for, in order: the first makes them, the others adopt them.
func sharedRuns(t *testing.T, root string, plan *contract.Plan, n int) []*runDir {
	t.Helper()
	var rds []*runDir
	for i := range n {
		rd, _, err := makeRunDir(root, "run-"+string(rune('a'+i)), "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := rd.placeholders(plan, nil); err != nil {
			t.Fatal(err)
		}
		rds = append(rds, rd)
	}
	return rds
}

// A second run in a workspace adopts the first's placeholders (its mask rests on them:
// unlinking one detaches the mask): the first leaves them when it ends, the second,
// the last that lists them, removes them.
func TestSharedPlaceholderOutlivesTheRunThatMadeIt(t *testing.T) {
	ws := t.TempDir()
	env, git := filepath.Join(ws, ".env"), filepath.Join(ws, ".git")
	plan := &contract.Plan{Mounts: []contract.Mount{
		{Path: git, Create: contract.PlaceholderDir},
		{Path: env, Create: contract.PlaceholderFile, Content: "# cordon\n"},
	}}
	rds := sharedRuns(t, filepath.Join(t.TempDir(), "runs"), plan, 2)
	a, b := rds[0], rds[1]
	if len(b.owner.Created) != 0 || !slices.Equal(b.owner.Adopted, []string{git, env}) || b.owner.Contents[env] != "# cordon\n" {
		t.Fatalf("the second run's record: created %v, adopted %v, contents %v", b.owner.Created, b.owner.Adopted, b.owner.Contents)
	}
	if err := a.remove(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{git, env} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the first run removed %s, which the second, still running, mounts over", p)
		}
	}
	if err := b.remove(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{git, env} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the last run left %s", p)
		}
	}
}

// Two runs sharing placeholders that end at once: each releases while the other's
// record is still there, and the second to take the lock must not take the first,
// which has let go, for one keeping them.
func TestSharedPlaceholderGoesWithTheLastRelease(t *testing.T) {
	ws := t.TempDir()
	env := filepath.Join(ws, ".env")
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: env, Create: contract.PlaceholderFile}}}
	rds := sharedRuns(t, filepath.Join(t.TempDir(), "runs"), plan, 2)
	for _, rd := range rds {
		if _, err := rd.release(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(env); err == nil {
		t.Error("both runs released and the placeholder is left")
	}
	// A third run, deciding before the released ones' records are gone, makes its own.
	c, _, err := makeRunDir(filepath.Dir(rds[0].path), "run-c", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.owner.Created, []string{env}) || len(c.owner.Adopted) != 0 {
		t.Errorf("a run after two released ones: created %v, adopted %v", c.owner.Created, c.owner.Adopted)
	}
	if _, err := os.Lstat(env); err != nil {
		t.Errorf("placeholder not made: %v", err)
	}
}

// gc removes a dead run's placeholders but those a live run adopted; a run that
// compiled while another's placeholder was there (no placeholder asked for) and
// decides once it is gone makes its own.
func TestGCLeavesAdoptedPlaceholders(t *testing.T) {
	ws := t.TempDir()
	env, vscode := filepath.Join(ws, ".env"), filepath.Join(ws, ".vscode")
	root := filepath.Join(t.TempDir(), "runs")
	plan := &contract.Plan{Mounts: []contract.Mount{
		{Path: env, Create: contract.PlaceholderFile},
		{Path: vscode, Create: contract.PlaceholderDir},
	}}
	dead := sharedRuns(t, root, plan, 1)[0]
	dead.owner.PID, dead.owner.Start = 1<<22+1, 42 // no such process
	if err := dead.save(); err != nil {
		t.Fatal(err)
	}
	// The live run compiled with .vscode present: it asks for no placeholder there.
	live, _, err := makeRunDir(root, "run-live", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := live.placeholders(&contract.Plan{Mounts: []contract.Mount{{Path: vscode, Dir: true}}}, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live.owner.Adopted, []string{vscode}) {
		t.Fatalf("the live run adopted %v, want [%s]", live.owner.Adopted, vscode)
	}
	if _, err := GC(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(vscode); err != nil {
		t.Error("gc removed the placeholder a live run mounts over")
	}
	if _, err := os.Lstat(env); err == nil {
		t.Error("gc left the dead run's placeholder no one lists")
	}
	if !Placeholder(root, vscode) {
		t.Error("an adopted placeholder is not taken for one")
	}
	if err := live.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(vscode); err == nil {
		t.Error("the last run left the placeholder it adopted")
	}
}

// A file at a placeholder path that no run recorded is the user's: mounted over as it
// is, never adopted, never removed.
func TestUsersFileIsNotAdopted(t *testing.T) {
	ws := t.TempDir()
	env := filepath.Join(ws, ".env")
	if err := os.WriteFile(env, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rd := sharedRuns(t, filepath.Join(t.TempDir(), "runs"), &contract.Plan{Mounts: []contract.Mount{{Path: env, Create: contract.PlaceholderFile}}}, 1)[0]
	if len(rd.owner.Created)+len(rd.owner.Adopted) != 0 {
		t.Errorf("the user's file was recorded: created %v, adopted %v", rd.owner.Created, rd.owner.Adopted)
	}
	if err := rd.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(env); err != nil {
		t.Error("the user's empty file was removed")
	}
}

// A run directory without an owner record is one being created (left alone) unless a
// cordon left it: killed in its teardown after the record went (releasedMark, or
// renamed for removal), or before it wrote the record (older than ownerlessGrace).
func TestGCTakesOwnerlessRunDirectoriesACordonLeft(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	mk := func(id string) string {
		rd, _, err := makeRunDir(root, id, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return rd.path
	}
	creating := mk("20261206T100000Z-000001")
	old := mk("20261206T100000Z-000002")
	released := mk("20261206T100000Z-000003")
	removing := mk("20261206T100000Z-000004")
	past := time.Now().Add(-2 * ownerlessGrace)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(released, releasedMark), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(removing, removing+removingSuffix); err != nil {
		t.Fatal(err)
	}
	sessions := paths.Root(root).Sessions()
	if err := os.Mkdir(sessions, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(sessions, past, past); err != nil {
		t.Fatal(err)
	}
	cleaned, err := GC(root)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(cleaned)
	if want := []string{filepath.Base(old), filepath.Base(released), filepath.Base(removing)}; !slices.Equal(cleaned, want) {
		t.Errorf("gc cleaned %v, want %v", cleaned, want)
	}
	for _, p := range []string{old, released, removing, removing + removingSuffix} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("gc left %s", p)
		}
	}
	for _, p := range []string{creating, sessions} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("gc removed %s: %v", p, err)
		}
	}
}

// The missing parents of a placeholder are recorded before they are made and removed
// after it, newest first, while empty; one that holds anything else stays, quietly. A
// run that adopts the placeholder keeps its parents too, and the last run removes them.
func TestPlaceholderParentsAreRemoved(t *testing.T) {
	ws := t.TempDir()
	a, ab := filepath.Join(ws, "a"), filepath.Join(ws, "a", "b")
	secret, other := filepath.Join(ab, "secret"), filepath.Join(ws, "c", "d", "secret")
	plan := &contract.Plan{Mounts: []contract.Mount{
		{Path: secret, Create: contract.PlaceholderFile},
		{Path: other, Create: contract.PlaceholderFile},
	}}
	rds := sharedRuns(t, filepath.Join(t.TempDir(), "runs"), plan, 2)
	first, second := rds[0], rds[1]
	c, cd := filepath.Join(ws, "c"), filepath.Join(ws, "c", "d")
	if want := []string{a, ab, c, cd}; !slices.Equal(first.owner.Parents, want) || !slices.Equal(second.owner.Parents, want) {
		t.Fatalf("parents recorded: %v and %v, want %v", first.owner.Parents, second.owner.Parents, want)
	}
	if err := first.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(secret); err != nil {
		t.Fatal("the first run removed a placeholder the second mounts over")
	}
	// The sandbox wrote beside the placeholder: c stays, with what it holds.
	kept := filepath.Join(c, "kept")
	if err := os.WriteFile(kept, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := second.remove(); err != nil {
		t.Fatalf("a parent that is not empty is no error: %v", err)
	}
	for _, p := range []string{secret, ab, a, other, cd} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the last run left %s", p)
		}
	}
	if _, err := os.Lstat(kept); err != nil {
		t.Errorf("the sandbox's file beside the placeholder is gone: %v", err)
	}
}

// A live run of an older cordon records no identities (runOwner.Identities): its
// placeholders are adopted by path, with the identity found, so that neither run
// removes the one the other's mask rests on. A dead one's are not: what is at their
// paths may be the user's.
func TestOlderCordonsLivePlaceholdersAreAdoptedByPath(t *testing.T) {
	ws := t.TempDir()
	env, envrc := filepath.Join(ws, ".env"), filepath.Join(ws, ".envrc")
	root := filepath.Join(t.TempDir(), "runs")
	older := func(id string, p string, alive bool) {
		rd, _, err := makeRunDir(root, id, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		rd.owner.Identities, rd.owner.Created = false, []string{p}
		if !alive {
			rd.owner.PID, rd.owner.Start = 1<<22+1, 42
		}
		if err := rd.save(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	older("run-older-live", env, true)
	older("run-older-dead", envrc, false)
	next, _, err := makeRunDir(root, "run-next", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.placeholders(&contract.Plan{Mounts: []contract.Mount{{Path: env}, {Path: envrc}}}, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(next.owner.Adopted, []string{env}) {
		t.Fatalf("adopted %v, want the live older run's %s alone", next.owner.Adopted, env)
	}
	if _, ok := next.owner.AdoptedIDs[env]; !ok {
		t.Errorf("adopted %s with no identity", env)
	}
}
