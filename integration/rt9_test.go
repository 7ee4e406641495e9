package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
