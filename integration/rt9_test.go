package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team rt9: the placeholders' life (making, placing, removal, the quarantine of
// what stands at a mask's path) against a hostile workspace.

// rt9DirBack is the sandbox's side of TestRT9MaskDirInodeReusedWithoutBirth: once
// ready, it makes .vscode as fast as it can (EEXIST while the placeholder, a mount
// point, is there), then writes settings a host editor obeys in it.
const rt9DirBack = `import os, time
open("ready", "w").close()
end = time.time() + 60
made = False
while time.time() < end:
    try:
        os.mkdir(".vscode")
        made = True
        break
    except FileExistsError:
        pass
if made:
    with open(".vscode/settings.json", "w") as f:
        f.write('{"terminal.integrated.shellArgs.linux": ["-c", "echo pwned"]}\n')
open("made", "w").close()
while not os.path.exists("go"):
    time.sleep(0.05)
`

// TestRT9MaskDirInodeReusedWithoutBirth: the workspace is on a file system without
// birth times (ext4 with 128-byte inodes), where a placeholder directory's identity is
// its device and inode number alone (a directory's change time moves with its
// entries). The host removes the empty .vscode placeholder during the run (git clean
// -fdx does); its mask in the sandbox goes with it, and the sandbox makes .vscode at
// once: ext4 gives the new directory the inode number just freed, in the same second,
// and so the identity cordon recorded for its placeholder. The live watch and the
// command's end take the sandbox's directory, with the settings it wrote in it, for
// the placeholder, and leave it on the host for the editor to obey.
func TestRT9MaskDirInodeReusedWithoutBirth(t *testing.T) {
	w := newWorld(t)
	mountNoBirth(t, w.ws)
	hostGit(t, w.ws, "init", "-q")
	mustWrite(t, filepath.Join(w.ws, "back.py"), rt9DirBack)
	vscode := filepath.Join(w.ws, ".vscode")
	var placed uint64
	cmd, got := maskRace(t, w, "python3 back.py", func(ended <-chan struct{}) {
		st, err := os.Lstat(vscode)
		if err != nil {
			t.Fatalf("the .vscode placeholder: %v", err)
		}
		placed = st.Sys().(*syscall.Stat_t).Ino
		if err := os.Remove(vscode); err != nil {
			t.Fatalf("removing the placeholder on the host: %v", err)
		}
		waitFor(t, time.Minute, "the sandbox's .vscode", func() bool {
			select {
			case <-ended:
				return true
			default:
			}
			return exists(filepath.Join(w.ws, "made"))
		})
	})
	t.Logf("the run (exit %d):\n%s", cmd.ProcessState.ExitCode(), got)
	if st, err := os.Lstat(vscode); err == nil {
		t.Logf(".vscode on the host: inode %d, the placeholder's was %d", st.Sys().(*syscall.Stat_t).Ino, placed)
	}
	if st, err := os.Lstat(vscode + ".cordon-quarantine"); err == nil {
		t.Logf("renamed aside: inode %d, the placeholder's was %d", st.Sys().(*syscall.Stat_t).Ino, placed)
	}
	if data, err := os.ReadFile(filepath.Join(vscode, "settings.json")); err == nil && strings.Contains(string(data), "pwned") {
		t.Fatalf("the sandbox's .vscode is on the host after the run, taken for the placeholder: settings.json %q", data)
	}
}

// TestRT9PlacedRemadeTakenForMade: a placeholder is held open from its making until it
// is placed, and no longer: a writer of the workspace that removes it once placed and
// makes a directory of its own at its name (before the sandbox's mask rests on it)
// gets its inode number, and, where the file system keeps birth times, its birth
// time when it is quick enough (the birth clock ticks every few milliseconds); where
// it keeps none, a directory's identity is its device and inode number alone, and the
// writer has until the sandbox starts. cordon then takes the writer's directory, with
// what it put in it, for its placeholder: the run goes on with it under its mask, and
// at its end leaves it on the host, never renamed aside, for a host tool to obey.
func TestRT9PlacedRemadeTakenForMade(t *testing.T) {
	for _, fs := range []string{"no birth time", "birth time"} {
		t.Run(fs, func(t *testing.T) { placedRemade(t, fs == "no birth time") })
	}
}

func placedRemade(t *testing.T, noBirth bool) {
	w := newWorld(t)
	if noBirth {
		mountNoBirth(t, w.ws)
	}
	hostGit(t, w.ws, "init", "-q")
	vscode := filepath.Join(w.ws, ".vscode")
	planted := filepath.Join(vscode, "settings.json")
	won := 0
	for try := 0; try < 30 && won < 2; try++ {
		cmd, done := startTrue(t, w)
		remade, same := false, false
		untilEnd(done, func() bool {
			made, err := linux.Identify(vscode)
			if err != nil {
				return false
			}
			// Placed: the run's goes, the writer's takes its name, with settings in it.
			if os.Remove(vscode) != nil || os.Mkdir(vscode, 0o755) != nil {
				return true
			}
			now, err := linux.Identify(vscode)
			same = err == nil && now == made
			remade = os.WriteFile(planted, []byte(`{"pwned": true}`+"\n"), 0o644) == nil
			return true
		})
		<-done
		quarantined, _ := filepath.Glob(vscode + ".cordon-quarantine*")
		if remade && same {
			won++
		}
		// Whether or not it took the identity, the writer's directory is not the
		// placeholder: a run that ends well has renamed it aside.
		if remade && exists(planted) && cmd.ProcessState.ExitCode() == 0 {
			t.Errorf("try %d: the run went on (exit 0) with the writer's .vscode under its mask (identity taken: %v), and left it on the host (not renamed aside)", try, same)
		}
		for _, p := range append(quarantined, vscode) {
			os.RemoveAll(p)
		}
		if r := w.cordon("", "gc"); r.code != 0 {
			t.Logf("gc: %v", r)
		}
	}
	t.Logf("the writer's directory took the placeholder's identity in %d runs", won)
}

// TestRT9PlacedSwappedBeforeWatch: between the placing of a placeholder and the start
// of the live watch (which stops a run whose mask's entry is replaced), nothing looks
// at it. A writer of the workspace that renames the .vscode placeholder away once it
// is placed and its own directory, with settings in it, into its place, has the run
// go on with that directory under its mask for the whole command: only the command's
// end renames it aside. The run must refuse, as it does when the swap lands later.
func TestRT9PlacedSwappedBeforeWatch(t *testing.T) {
	w := newWorld(t)
	hostGit(t, w.ws, "init", "-q")
	vscode := filepath.Join(w.ws, ".vscode")
	evil, old := filepath.Join(w.ws, "evil"), filepath.Join(w.ws, "old")
	won := 0
	for try := 0; try < 10 && won < 2; try++ {
		mustWrite(t, filepath.Join(evil, "settings.json"), `{"pwned": true}`+"\n")
		cmd := exec.Command(testutil.Cordon(t), "run", "--", "sleep", "1")
		cmd.Dir, cmd.Env = w.ws, w.env
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		swapped := false
		untilEnd(done, func() bool {
			if !exists(vscode) {
				return false
			}
			swapped = os.Rename(vscode, old) == nil && os.Rename(evil, vscode) == nil
			return true
		})
		<-done
		if swapped {
			won++
			if cmd.ProcessState.ExitCode() == 0 {
				t.Errorf("try %d: the run went on (exit 0) with the writer's .vscode under its mask:\n%s", try, out.String())
			}
		}
		quarantined, _ := filepath.Glob(vscode + ".cordon-quarantine*")
		for _, p := range append(quarantined, vscode, evil, old) {
			os.RemoveAll(p)
		}
		if r := w.cordon("", "gc"); r.code != 0 {
			t.Logf("gc: %v", r)
		}
	}
	t.Logf("the swap landed in %d runs", won)
}

// TestRT9GCWorkspaceFifo: cordon is killed during a run; a process of the workspace
// owner's (who may write the workspace's parent, as a home directory is) then puts a
// fifo where the workspace was. `cordon gc`, which every run starts with, sweeps the
// dead run's workspace for repositories its sandbox made (sweepRepositories): it opened
// the workspace by name, following links, and blocked on the fifo for good.
func TestRT9GCWorkspaceFifo(t *testing.T) {
	for _, plant := range []string{"fifo", "link to a fifo"} {
		t.Run(plant, func(t *testing.T) {
			w := newWorld(t)
			hostGit(t, w.ws, "init", "-q")
			cmd := exec.Command(testutil.Cordon(t), "run", "--", "sleep", "60")
			cmd.Dir, cmd.Env = w.ws, w.env
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Its placeholders are made once its owner record is written.
			waitFor(t, time.Minute, "the run's .envrc placeholder", func() bool { return exists(filepath.Join(w.ws, ".envrc")) })
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			moved := w.ws + ".moved"
			if err := os.Rename(w.ws, moved); err != nil {
				t.Fatal(err)
			}
			fifo := w.ws
			if plant != "fifo" {
				fifo = filepath.Join(t.TempDir(), "fifo")
				if err := os.Symlink(fifo, w.ws); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := exec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
				t.Fatalf("mkfifo: %v: %s", err, out)
			}
			defer func() {
				os.Remove(w.ws)
				os.Rename(moved, w.ws) // the world's cleanup looks at it
			}()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			gc := exec.CommandContext(ctx, testutil.Cordon(t), "gc")
			gc.Dir, gc.Env = filepath.Dir(w.ws), w.env
			out, err := gc.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("cordon gc blocked on the fifo at the dead run's workspace (killed after a minute): %s", out)
			}
			t.Logf("gc: %v: %s", err, out)
		})
	}
}

// TestRT9ContractFifo (rt9, found and left by the red team): the workspace's
// cordon.yaml, read when no contract is named, is the workspace's writers' to
// replace. A fifo there hung `cordon run` at the contract's open, and every run in
// that workspace after it; a file of gigabytes would be read whole. Either is refused
// at once with a reason.
func TestRT9ContractFifo(t *testing.T) {
	w := newWorld(t)
	p := filepath.Join(w.ws, "cordon.yaml")
	os.Remove(p)
	if out, err := exec.Command("mkfifo", p).CombinedOutput(); err != nil {
		t.Fatalf("mkfifo: %v: %s", err, out)
	}
	start := time.Now()
	r := w.cordon("", "run", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "not a regular file") || time.Since(start) > time.Minute {
		t.Errorf("a fifo at ./cordon.yaml: %v after %v; want a refusal naming it not a regular file, at once", r, time.Since(start))
	}
	os.Remove(p)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: a gigabyte of zeros
		t.Fatal(err)
	}
	f.Close()
	if r := w.cordon("", "run", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "larger than") {
		t.Errorf("a 1 GiB ./cordon.yaml: %v; want it refused as larger than a contract is", r)
	}
}
