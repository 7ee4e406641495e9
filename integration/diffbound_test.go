package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
)

// diffFlood is the red team's attack on the host side of the diff: a 60 GB sparse file
// (no disk used) that cordon hashed byte by byte for minutes, ARGV[0] empty files that
// made cordon grow by hundreds of MB and write one 40 MB fs.diff line, and a nested
// repository planted after them, past any bound on what the diff records.
const diffFlood = `my $n = shift;
truncate(do { open(my $f, ">", "huge.img") or die "huge: $!"; $f }, 60 * 1024**3) or die "truncate: $!";
mkdir "flood" or die;
for my $i (1..$n) { open(my $f, ">", sprintf("flood/f%06d", $i)) or die "create: $!"; }
mkdir "zz"; mkdir "zz/.git"; mkdir "zz/.git/hooks";
if (open(my $h, ">", "zz/.git/config")) { print $h "[core]\n\tfsmonitor = touch /tmp/pwned\n"; close $h; } # the live watch may have disarmed zz/.git
print "made $n\n";
`

// TestRedDiffBounded (bwrap): what the sandbox leaves in the workspace bounds what
// cordon does about it on the host. The exec ends in bounded time, the fs.diff line is
// bounded, the log says exactly what the diff did not do (the entries past the bound,
// the sparse file not hashed), it verifies, and the repository planted past the bound
// is still quarantined.
func TestRedDiffBounded(t *testing.T) {
	w := newWorld(t)
	// Making files in the sandbox runs at a few thousand a second on a busy machine,
	// so the flood is scaled down with the bound: 30,000 files past 5,000 entries is
	// the 200,000 past the default 100,000, six times over.
	const files = 30_000
	w.contract("version: 1\nlimits: {diff: {entries: 5000}}\n")
	start := time.Now()
	r := w.cordon("", "run", "--", "perl", "-e", diffFlood, strconv.Itoa(files))
	took := time.Since(start)
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("made %d", files)) {
		t.Fatalf("the flood did not run: %v", r)
	}
	if took > 100*time.Second {
		t.Errorf("cordon run took %v; want it bounded", took)
	}
	var d audit.FSDiff
	var size int
	var ended, diffed time.Time
	for _, rec := range lastRun(t, w) {
		if rec.Type == event.CmdEnd {
			ended = rec.TS
		}
		if rec.Type == event.FSDiff {
			diffed = rec.TS
			if err := rec.DecodeBody(&d); err != nil {
				t.Fatal(err)
			}
			size = len(rec.Body)
		}
	}
	// cordon's own work on the host after the command: unbounded, hashing 60 GB
	// took minutes.
	if work := diffed.Sub(ended); ended.IsZero() || work > 15*time.Second {
		t.Errorf("cmd.end to fs.diff took %v; want the diff bounded (well under 15s)", work)
	}
	t.Logf("cordon run: %v, diff %v; fs.diff line %d bytes, %d files, %d itemized, gap %+v", took, diffed.Sub(ended), size, d.Files, len(d.Changes), d.Gap)
	if size == 0 || size > 1<<20 {
		t.Errorf("fs.diff body is %d bytes; want one, at most 1 MiB", size)
	}
	g := d.Gap
	if g == nil {
		t.Fatalf("fs.diff records no gap; want the entries past limits.diff.entries counted")
	}
	if g.Unlisted == 0 || g.IncompleteDirs == 0 || len(g.IncompletePaths) == 0 {
		t.Errorf("gap %+v: want the unrecorded entries counted and their directories named", g)
	}
	if d.Files+g.Unlisted < files {
		t.Errorf("%d changes + %d unlisted < %d files made: the gap does not account for them", d.Files, g.Unlisted, files)
	}
	if g.NotHashed != 1 || len(g.NotHashedPaths) != 1 || g.NotHashedPaths[0] != "huge.img" {
		t.Errorf("gap %+v: want huge.img named as not hashed", g)
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "zz", ".git.cordon-quarantine")); err != nil {
		t.Errorf("the repository planted past the bound was not quarantined: %v", err)
	}
	if v := w.cordon("", "audit", "verify", "last"); v.code != 0 || !strings.Contains(v.stdout, "limits.diff bound") {
		t.Errorf("audit verify: %v; want intact, with the gap counted", v)
	}
	show := w.cordon("", "audit", "show", "last")
	assertContains(t, "audit show", show.stdout, "GAP    diff incomplete:")
	assertContains(t, "audit show", show.stdout, "GAP    not hashed: huge.img")
}
