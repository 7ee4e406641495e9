package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedStagedDiffLinear (bwrap, root): the diff of a staged run costs cordon time in
// proportion to the change set, not its square. The red team's attack: a staged run
// that makes 30,000 empty files with long names. Each new path of the change set is a deep one, and
// cordon compared every path with every deep path before it: 20,000 files took 40 s
// of cordon's CPU after the command ended, 150,000 more than ten minutes, outside the
// run's cgroup and past its timeout, whatever limits.diff said.
func TestRedStagedDiffLinear(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	// entries past the change set: a staged change set larger than entries is refused
	// whole (TestStagedChangeSetBounded), and this attack is on the diff's time.
	w.contract("version: 1\nlimits: {diff: {entries: 40000}}\n")
	const files = 30_000
	flood := `my $n = shift; my $pad = "x" x 240; mkdir "big" or die; for my $i (1..$n) { open(my $f, ">", sprintf("big/%s%09d", $pad, $i)) or die "create: $!"; } print "made $n\n";`
	r := w.cordon("", "run", "--stage", "--", "perl", "-e", flood, strconv.Itoa(files))
	if r.code != 0 || !strings.Contains(r.stdout, "made "+strconv.Itoa(files)) {
		t.Fatalf("the staged flood did not run: %v", r)
	}
	var ended, diffed time.Time
	for _, rec := range lastRun(t, w) {
		switch rec.Type {
		case event.CmdEnd:
			ended = rec.TS
		case event.FSDiff:
			diffed = rec.TS
		}
	}
	work := diffed.Sub(ended)
	t.Logf("cmd.end to fs.diff: %v for %d staged files", work, files)
	if ended.IsZero() || diffed.IsZero() || work > 15*time.Second {
		t.Errorf("cmd.end to fs.diff took %v (cmd.end %v, fs.diff %v); want the diff of %d staged files well under 15s", work, ended, diffed, files)
	}
}
