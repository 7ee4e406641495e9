package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// listingFlood makes ARGV[0] empty files with 240-character names in one directory,
// then plants a nested repository after them (its name sorts last; the live watch may
// disarm it first, hence no die there).
const listingFlood = `my $n = shift; my $pad = "x" x 240;
mkdir "big" or die;
for my $i (1..$n) { open(my $f, ">", sprintf("big/%s%09d", $pad, $i)) or die "create: $!"; }
mkdir "zz"; mkdir "zz/.git"; mkdir "zz/.git/hooks";
if (open(my $h, ">", "zz/.git/config")) { print $h "[core]\n\tfsmonitor = touch /tmp/pwned\n"; close $h; }
print "made $n\n";
`

// cordonRSS runs cordon in w's workspace and returns its result and its peak resident
// set size in bytes (the sandbox's processes are in other namespaces and cgroups, but
// a waited-for child counts: the flood's perl stays far below the margin).
func cordonRSS(t *testing.T, w *world, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), args...)
	cmd.Dir, cmd.Env = w.ws, w.env
	r := runResult(t, cmd, "cordon")
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage")
	}
	return r, ru.Maxrss << 10
}

// TestRedDiffListingBounded (bwrap): the diff's entries bound also bounds what cordon
// holds of one directory. The red team's attack: one directory of many long names.
// cordon read every name into memory (sorted, to pick the first ones the bound lets
// it record) before the bound applied, and the quarantine sweep that runs after a
// bounded diff read the directory whole again (filepath.WalkDir), so cordon grew
// with the directory, whatever limits.diff.entries said. Now its peak stays within a
// margin of a run that makes nothing, the gap still counts every name, and the
// repository planted past the bound is still quarantined.
func TestRedDiffListingBounded(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\nlimits: {diff: {entries: 100}}\n")
	// Without the bound on listing, 150,000 names of 250 bytes cost cordon about 100 MB.
	const files, margin = 150_000, 40 << 20
	base, baseRSS := cordonRSS(t, w, "run", "--", "true")
	if base.code != 0 {
		t.Fatalf("baseline run: %v", base)
	}
	r, rss := cordonRSS(t, w, "run", "--", "perl", "-e", listingFlood, strconv.Itoa(files))
	if r.code != 0 || !strings.Contains(r.stdout, "made "+strconv.Itoa(files)) {
		t.Fatalf("the flood did not run: %v", r)
	}
	t.Logf("cordon peak RSS: %d MiB for a run that makes nothing, %d MiB for the flood", baseRSS>>20, rss>>20)
	if rss > baseRSS+margin {
		t.Errorf("cordon's peak RSS grew by %d MiB for one directory of %d names past a bound of 100 entries; want at most %d MiB",
			(rss-baseRSS)>>20, files, margin>>20)
	}
	var d audit.FSDiff
	for _, rec := range lastRun(t, w) {
		if rec.Type == event.FSDiff {
			if err := rec.DecodeBody(&d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g := d.Gap; g == nil || d.Files+g.Unlisted < files || g.IncompleteDirs == 0 {
		t.Errorf("fs.diff: %d files, gap %+v: want every name of big/ counted", d.Files, d.Gap)
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "zz", ".git.cordon-quarantine")); err != nil {
		t.Errorf("the repository planted past the bound was not quarantined: %v", err)
	}
}
