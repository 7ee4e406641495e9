package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Red-team tests of staged sessions: checkpoints and rollback, through the real
// binary. Each is an attack by the sandbox (or on cordon) and asserts it fails.

// diskUse is the bytes of blocks the files below dir hold, each inode once.
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil && !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// TestRedSessHardLinkAmplification: the sandbox writes one 2 MiB file and 40 hard
// links to it (2 MiB in the upper directory); a checkpoint must not cost the host 40
// copies of it (80 MiB: with the ext4 limit of 65,000 links, one 1 GiB file would cost
// 65 TB per checkpoint, one before every command).
func TestRedSessHardLinkAmplification(t *testing.T) {
	w := newStageWorld(t)
	id := w.startSession("--stage")
	w.exec(id, "mkdir big && head -c 2097152 /dev/urandom > big/f && for i in $(seq 1 40); do ln big/f big/l$i; done")
	r := w.cordon("", "session", "checkpoint", id)
	if r.code != 0 {
		t.Fatalf("checkpoint: %v", r)
	}
	upper := diskUse(t, w.upper(id))
	cps := diskUse(t, filepath.Join(w.stageDir(id), "checkpoints"))
	if cps > 2*upper+1<<20 {
		t.Errorf("the checkpoints of a %d-byte upper directory hold %d bytes: hard links amplified", upper, cps)
	}
	// The rollback to before the links still restores each name as the file it was.
	w.exec(id, "rm big/l3; echo other > big/l4")
	w.rollback(id, strings.TrimSpace(r.stdout))
	if got := w.exec(id, "cmp big/f big/l3 && cmp big/f big/l4 && echo same"); got != "same\n" {
		t.Errorf("after the rollback: %q", got)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	if r := w.cordon("", "discard", id); r.code != 0 {
		t.Fatalf("discard: %v", r)
	}
	w.verify(id)
	if _, err := os.Stat(filepath.Join(w.ws, "big")); err == nil {
		t.Errorf("discard left big")
	}
}
