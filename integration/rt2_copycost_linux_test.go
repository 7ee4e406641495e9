package integration

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// rt2DeepDirs is what a sandbox runs to make, below a chain of $1 new directories
// (c/c/…/c), $2 directories: opaque ones ($3 = opaque: each made over the whiteout of
// the workspace's w and moved down there, keeping its mark) or plain ones.
const rt2DeepDirs = `D=$1; N=$2; set -e
p=c; i=1; while [ $i -lt $D ]; do p=$p/c; i=$((i+1)); done; mkdir -p $p
[ "$3" = opaque ] && rm w
i=0; while [ $i -lt $N ]; do
  if [ "$3" = opaque ]; then mkdir w; mv w $p/o$i; else mkdir $p/o$i; fi
  i=$((i+1))
done
echo w > w`

// TestRT2CopyCheckCostUnbounded (red team rt2): every reader of a staged session's
// upper directory asks, of each opaque directory, whether it is a copy (isCopy), and
// copyOf first asks mergedAt, which opens each directory on the way up by its path
// from the root. Asked afresh for each of 300 opaque directories the sandbox moved
// 600 levels down, that was work growing with the depth squared (a checkpoint, taken
// before every command, took 12 s where 300 plain directories there took 0.5 s), and
// the budget of telling copies never counted it: PATH_MAX depth and the default bound
// made it hours of host time. Each directory's answer is now kept for the reader call
// and each walk is taken from a budget of names (TestMergedAtWalksWithinTheBudget): a
// checkpoint of the opaque tree costs about what the plain tree's does.
func TestRT2CopyCheckCostUnbounded(t *testing.T) {
	const depth, n = 600, 300
	took := map[string]time.Duration{}
	for _, kind := range []string{"plain", "opaque"} {
		w := newStageWorld(t)
		mustWrite(t, filepath.Join(w.ws, "w"), "w\n")
		id := w.startSession("--stage")
		r := w.cordon("", "exec", id, "--", "sh", "-c", rt2DeepDirs, "sh", strconv.Itoa(depth), strconv.Itoa(n), kind)
		if r.code != 0 {
			t.Fatalf("%s: making the tree: %v", kind, r)
		}
		start := time.Now()
		if r := w.cordon("", "session", "checkpoint", id); r.code != 0 {
			t.Fatalf("%s: checkpoint: %v", kind, r)
		}
		took[kind] = time.Since(start)
		if r := w.cordon("", "session", "stop", id); r.code != 0 {
			t.Fatalf("stop: %v", r)
		}
	}
	t.Logf("a checkpoint of %d directories %d levels down: plain %v, opaque %v", n, depth, took["plain"], took["opaque"])
	if took["opaque"] > 4*took["plain"]+time.Second {
		t.Errorf("a checkpoint of %d opaque directories %d levels down took %v, of as many plain ones %v: telling copies costs the host work no budget bounds",
			n, depth, took["opaque"], took["plain"])
	}
}
