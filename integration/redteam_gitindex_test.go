package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// plantLyingIndex: a run under filesystem.git: commit (where the index and loose
// objects are writable, and an agent's commit changes them anyway) makes the index
// claim the blob of "evil!\n" for f.sh, whose content stays "good!\n" and whose stat
// data the entry already holds. The run's own diff shows .git/index, as any commit does.
func plantLyingIndex(t *testing.T) *world {
	w := newWorld(t)
	w.gitRepo()
	mustWrite(t, filepath.Join(w.ws, "f.sh"), "good!\n")
	hostGit(t, w.ws, "add", "f.sh")
	hostGit(t, w.ws, "commit", "-qm", "f")
	w.contract("version: 1\nfilesystem:\n  git: commit\n")
	hostGit(t, w.ws, "add", "cordon.yaml")
	hostGit(t, w.ws, "commit", "-qm", "contract")
	r := w.sh(`oid=$(printf 'evil!\n' | git hash-object -w --stdin) && python3 - "$oid" <<'PY'
import sys, hashlib
d = bytearray(open('.git/index', 'rb').read())
off = d.index(b'\x00\x04f.sh\x00') + 2 - 62 + 40
d[off:off+20] = bytes.fromhex(sys.argv[1])
d[-20:] = hashlib.sha1(bytes(d[:-20])).digest()
open('.git/index', 'wb').write(d)
print("planted")
PY`)
	assertContains(t, "plant", r.stdout, "planted")
	time.Sleep(300 * time.Millisecond) // out of the racy window
	if got, _ := os.ReadFile(filepath.Join(w.ws, "f.sh")); string(got) != "good!\n" {
		t.Fatalf("f.sh is %q", got)
	}
	return w
}

// TestRedGitIndexHidesWrite: in the next run the command overwrites f.sh ("good!")
// with "evil!" and hides the write behind a mode change, a rename, or shows it as a
// one-line change against the index's claim.
func TestRedGitIndexHidesWrite(t *testing.T) {
	for name, script := range map[string]string{
		"chmod":  `printf 'evil!\n' > f.sh && chmod +x f.sh`,
		"rename": `printf 'evil!\n' > g.sh && rm f.sh`,
		"append": `printf 'evil!\nok\n' > f.sh`,
	} {
		t.Run(name, func(t *testing.T) {
			w := plantLyingIndex(t)
			if r := w.sh(script); r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			show := w.cordon("", "audit", "show", "--diff", "last")
			t.Logf("diff of the run:\n%s", show.stdout)
			if !strings.Contains(show.stdout, "-good!") && !strings.Contains(show.stdout, "rewritten with the content the git index recorded") {
				t.Errorf("%s: good! -> evil! is not in the diff, nor flagged as unverified", name)
			}
		})
	}
}
