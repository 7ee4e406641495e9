package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestAsideSwapRefused (red team, rt6): a placeholder is made under a name of its
// run's own (.cordon-placing-ID-<digest of its name>), recorded, then renamed into
// place. A local writer of the workspace (here this test, which knows the run's id as
// root reading the run root) that sees the name made aside for .envrc (a directory
// placeholder) puts a directory of its own in its place: cordon must
// not rename that entry into place as its placeholder and run. Before the fix, the run
// went on with the writer's .envrc under its mask (the quarantine moved it away at the
// end), where before 17fd55b the same writer could only take .envrc itself, which
// refused the run. Through the real binary, racing each run until the swap lands
// between the record and the rename. The writer's directory is one made before
// (renamed), or one made at the name once the run's is removed (made again), which
// ext4 gives the removed one's inode number, and in the same tick of its birth clock,
// unless cordon holds what it made open until it is placed. The writer that makes
// its directory again is another user than cordon (its entries are another's, as the
// workspace's are when cordon runs as root for its user): cordon takes a directory it
// made for its own only when it is empty and its user's, and what a writer of cordon's
// own user can put there is no more than what it could put in the one made (a root
// writer's directory, empty when cordon opened it, was taken: its file came after).
func TestAsideSwapRefused(t *testing.T) {
	for _, how := range []string{"renamed", "made again"} {
		t.Run(how, func(t *testing.T) { asideSwap(t, how == "made again") })
	}
}

// asideSwap races runs as TestAsideSwapRefused says, the writer's directory made at
// the name made aside (again) or renamed there.
func asideSwap(t *testing.T, again bool) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	envrc := filepath.Join(w.ws, ".envrc")
	evil := filepath.Join(w.ws, "evil")
	// plant puts the writer's directory, with a file in it (.envrc is made a
	// directory), at name.
	plant := func(name string) bool {
		if !again {
			return os.Rename(evil, name) == nil
		}
		return os.Mkdir(name, 0o700) == nil && os.WriteFile(filepath.Join(name, "planted"), []byte("echo pwned\n"), 0o644) == nil
	}
	won := 0
	for try := 0; try < 20 && won < 3; try++ {
		if !again {
			mustWrite(t, filepath.Join(evil, "planted"), "echo pwned\n")
		}
		cmd, done := startTrue(t, w)
		// The run's id is its run directory's name, made before its placeholders: the
		// name made aside follows from it, and is watched for with a removal and a plant a turn.
		aside, swaps := "", 0
		race := func() error {
			untilEnd(done, func() bool {
				if aside == "" {
					aside = asideName(w, envrc)
					return false
				}
				// The run's empty directory goes, the writer's takes its name.
				if os.Remove(aside) == nil && plant(aside) {
					swaps++
				}
				return false
			})
			return nil
		}
		if again {
			// What this thread makes is linux.NoReserveUID's; it may still write
			// anywhere in the workspace, as root's tools may.
			err := linux.WithoutReserve(race)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			race()
		}
		// The writer's directory, wherever it went: at .envrc (placed, the run refused),
		// or moved from there at the run's end (.envrc.cordon-quarantine...: placed, and
		// the run went on).
		quarantined, _ := filepath.Glob(envrc + ".cordon-quarantine*")
		placed := exists(filepath.Join(envrc, "planted"))
		for _, q := range quarantined {
			placed = placed || exists(filepath.Join(q, "planted"))
		}
		if placed && swaps > 0 {
			won++
			switch stderr := cmd.Stderr.(*bytes.Buffer).String(); {
			case cmd.ProcessState.ExitCode() == 0:
				t.Errorf("try %d: the run went on (exit 0) with the writer's .envrc, put into place as its placeholder", try)
			case !strings.Contains(stderr, "replaced"):
				t.Errorf("try %d: the run was refused (exit %d), but not for the swap: %s", try, cmd.ProcessState.ExitCode(), stderr)
			}
		}
		// The next try starts without any of it.
		for _, p := range append(quarantined, evil, envrc, aside) {
			if p != "" && exists(filepath.Join(p, "planted")) {
				os.RemoveAll(p)
			}
		}
		if r := w.cordon("", "gc"); r.code != 0 {
			t.Logf("gc: %v", r)
		}
	}
	// A race that never landed is a run that went on with its own placeholder:
	// checked above all the same, not a skip (nothing that needs bwrap skips in CI).
	t.Logf("the swap landed in %d runs", won)
}

// TestKilledAsidePlantedGC (red team, rt6): cordon is SIGKILLed while its .envrc
// placeholder is aside; the workspace then puts at that name a link to a directory
// outside it (empty: it would pass for a placeholder) or a fifo, and `cordon gc` runs.
// gc must follow no link, not block on the fifo, remove nothing outside, and leave the
// workspace as it was but for what was planted.
func TestKilledAsidePlantedGC(t *testing.T) {
	for _, plant := range []string{"link", "fifo"} {
		t.Run(plant, func(t *testing.T) {
			w := newWorld(t)
			hostGit(t, w.ws, "init", "-q")
			outside := filepath.Join(t.TempDir(), "victim")
			mustMkdir(t, outside)
			before := testutil.Tree(t, w.ws)
			for try := 0; try < 10; try++ {
				cmd, done := startTrue(t, w)
				aside, killed := "", false
				untilEnd(done, func() bool {
					if aside == "" {
						aside = asideName(w, filepath.Join(w.ws, ".envrc"))
						return false
					}
					if exists(aside) {
						cmd.Process.Signal(syscall.SIGKILL)
						<-done
						killed = true
					}
					return killed
				})
				if !killed || !exists(aside) {
					continue // placed before the kill: try again
				}
				if err := os.Remove(aside); err != nil {
					t.Fatal(err)
				}
				switch plant {
				case "link":
					if err := os.Symlink(outside, aside); err != nil {
						t.Fatal(err)
					}
				case "fifo":
					if out, err := exec.Command("mkfifo", aside).CombinedOutput(); err != nil {
						t.Fatalf("mkfifo: %v: %s", err, out)
					}
				}
				// What was planted is not cordon's to report: gc says nothing of it.
				if r := w.cordon("", "gc"); r.code != 0 {
					t.Errorf("gc: %v", r)
				}
				if !exists(outside) {
					t.Fatal("gc removed the directory outside the workspace a link at the name made aside pointed to")
				}
				if err := os.Remove(aside); err != nil {
					t.Fatalf("what was planted at %s: %v", aside, err)
				}
				if after := testutil.Tree(t, w.ws); !slices.Equal(after, before) {
					t.Fatalf("after a kill and gc the workspace holds %q, want %q", after, before)
				}
				return
			}
			t.Log("no run was killed with its .envrc aside in 10 tries: nothing was planted this time")
		})
	}
}

// startTrue starts `cordon run -- true` in w's workspace; done is closed once it has
// ended (and been waited for).
func startTrue(t *testing.T, w *world) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "true")
	cmd.Dir, cmd.Env, cmd.Stderr = w.ws, w.env, new(bytes.Buffer)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	return cmd, done
}

// asideName is the name under which the run whose directory is in w's run root makes
// the placeholder p before placing it (its id and a digest of p's name), or "" while
// there is no run directory: the run makes it before its placeholders.
func asideName(w *world, p string) string {
	ents, _ := os.ReadDir(w.runRoot)
	for _, e := range ents {
		if audit.ValidateRunID(e.Name()) == nil {
			sum := sha256.Sum256([]byte(filepath.Base(p)))
			return filepath.Join(filepath.Dir(p), ".cordon-placing-"+e.Name()+"-"+hex.EncodeToString(sum[:8]))
		}
	}
	return ""
}

// untilEnd calls step as fast as it can until done is closed or step returns true.
func untilEnd(done <-chan struct{}, step func() bool) {
	for {
		select {
		case <-done:
			return
		default:
		}
		if step() {
			return
		}
	}
}
