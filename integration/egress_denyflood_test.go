package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// denyFlood makes ARGV[0] denied attempts at the proxy, one connection each, each
// waiting for its answer (so that the proxy has seen every one): CONNECTs to distinct
// made-up names, every tenth a SOCKS5 request instead. It prints how many were denied.
const denyFlood = `use IO::Socket::INET;
my ($n) = @ARGV;
my $denied = 0;
for my $i (1..$n) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
  my $host = "h$i.flood.invalid";
  if ($i % 10 == 0) {
    print $s "\x05\x01\x00"; read($s, my $m, 2);
    print $s "\x05\x01\x00\x03" . chr(length $host) . $host . "\x01\xbb";
    read($s, my $r, 10); $denied++ if length($r) >= 2 && substr($r, 1, 1) ne "\x00";
  } else {
    print $s "CONNECT $host:443 HTTP/1.1\r\nHost: $host:443\r\n\r\n";
    my $status = <$s> // ""; $denied++ if $status =~ m{^HTTP/1\.[01] 403 };
  }
  close $s;
}
print "denied $denied of $n\n";
`

// Figures of the run's deny budget (runner/tally/denybudget.go), which the log must keep.
const (
	floodBurst = 1000 // net.deny lines itemized at once
	floodRate  = 100  // a second, after that
	floodKept  = 1000 // denials a command's result lists
)

// floodTally is what a log says of a flood: the net.deny lines, and what the
// net.deny.summary lines count, by command.
type floodTally struct {
	itemized, counted map[string]int64
	summaries         int
	first, last       time.Time // of the net.deny lines
}

func tallyFlood(t *testing.T, recs []audit.Record) floodTally {
	t.Helper()
	f := floodTally{itemized: map[string]int64{}, counted: map[string]int64{}}
	for _, rec := range recs {
		switch rec.Type {
		case event.NetDeny:
			f.itemized[rec.Cmd]++
			if f.first.IsZero() {
				f.first = rec.TS
			}
			f.last = rec.TS
		case event.NetDenySummary:
			var b event.NetDenySummaryBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatalf("net.deny.summary body: %v: %s", err, rec.Body)
			}
			if b.Denied <= 0 || len(b.Reasons) == 0 || b.First.After(b.Last) {
				t.Errorf("a summary that counts nothing, or out of order: %s", rec.Body)
			}
			f.counted[rec.Cmd] += b.Denied
			f.summaries++
		}
	}
	return f
}

// assertLogBounded checks that a flooded log is what its budget allows, however long
// the flood took: its itemized lines (of the types given: lines in all, which the
// caller holds to the token bucket's bound) each under 1 KiB, and the rest (the
// summaries that count every other attempt, and the run's own lines) under 64 KiB and
// 8 KiB a summary. Unbudgeted, a flood is some 540 bytes of log an attempt.
func assertLogBounded(t *testing.T, path string, lines int64, summaries int, itemized ...event.Type) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var of, rest int64
	for line := range bytes.SplitAfterSeq(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var l struct {
			Type event.Type `json:"type"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("%s: %v: %q", path, err, line)
		}
		if slices.Contains(itemized, l.Type) {
			of += int64(len(line))
		} else {
			rest += int64(len(line))
		}
	}
	if of > lines<<10 {
		t.Errorf("%d bytes of %v lines for %d of them; want under 1 KiB a line", of, itemized, lines)
	}
	if limit := int64(64<<10 + summaries*8<<10); rest > limit {
		t.Errorf("%d bytes of log besides the %v lines, %d summaries among them; want under %d", rest, itemized, summaries, limit)
	}
	t.Logf("events.jsonl: %d bytes, %d of them in %d %v lines; %d summaries", len(b), of, lines, itemized, summaries)
}

// TestDenyFloodBounded (red team, denyflood): a command denied 4,000 times (four times
// the budget's burst; the red team's flood was 20,000), each to another destination,
// through CONNECT and SOCKS5. The log itemizes the budget's burst and rate and counts
// the rest in net.deny.summary lines joined to the command: the two add up to every
// attempt, the log is no more than that (assertLogBounded), it verifies, and cordon
// run says how many denials it does not list.
func TestDenyFloodBounded(t *testing.T) {
	t.Run("bwrap", testDenyFloodBounded)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testDenyFloodBounded(t) })
}

func testDenyFloodBounded(t *testing.T) {
	const n = 4000
	w := newWorld(t)
	w.contract("version: 1\n")
	mustWrite(t, filepath.Join(w.ws, "flood.pl"), denyFlood)
	r := w.sh("perl flood.pl " + strconv.Itoa(n))
	if r.code != 0 || !strings.Contains(r.stdout, "denied "+strconv.Itoa(n)+" of "+strconv.Itoa(n)) {
		t.Fatalf("want every attempt denied: %v", r)
	}
	assertContains(t, "stderr", r.stderr, "cordon: and "+strconv.Itoa(n-floodKept)+" more denied connection attempts (cordon audit show)\n")
	recs := lastRun(t, w)
	cmd := ""
	for _, rec := range recs {
		if rec.Type == event.CmdStart {
			cmd = rec.Cmd
		}
	}
	f := tallyFlood(t, recs)
	if f.itemized[cmd]+f.counted[cmd] != n || len(f.itemized)+len(f.counted) != 2 {
		t.Errorf("itemized %v + counted %v (by command); want %d in all, all of command %s", f.itemized, f.counted, n, cmd)
	}
	if f.summaries == 0 {
		t.Errorf("no net.deny.summary line")
	}
	// The token bucket's own bound, over the time the log itself records.
	if bound := floodBurst + int64(f.last.Sub(f.first).Seconds()*floodRate) + 1; f.itemized[cmd] > bound {
		t.Errorf("%d net.deny lines over %s; the budget allows %d", f.itemized[cmd], f.last.Sub(f.first), bound)
	}
	runs, err := audit.List(w.auditRoot())
	if err != nil || len(runs) == 0 {
		t.Fatal(err)
	}
	assertLogBounded(t, filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile), f.itemized[cmd], f.summaries, event.NetDeny)
	if v := w.cordon("", "audit", "verify", "last"); v.code != 0 {
		t.Errorf("audit verify: %v", v)
	}
	show := w.cordon("", "audit", "show", "last")
	assertContains(t, "audit show", show.stdout, strconv.Itoa(n)+" denied")
	assertContains(t, "audit show", show.stdout, "more, not itemized")
}

// TestDenyFloodSessionResult: in a session, `cordon exec --json` of a flooded command
// counts in denied_more what denied_egress does not list, and the log's lines of that
// command add up to every attempt; a later quiet command is denied, and listed, alone.
func TestDenyFloodSessionResult(t *testing.T) {
	const n = 3000
	w := newWorld(t)
	w.contract("version: 1\n")
	mustWrite(t, filepath.Join(w.ws, "flood.pl"), denyFlood)
	id := w.startSession()
	r := w.cordon("", "exec", id, "--json", "--", "perl", "flood.pl", strconv.Itoa(n))
	var res struct {
		Cmd          string   `json:"cmd"`
		ExitCode     int      `json:"exit_code"`
		DeniedEgress []string `json:"denied_egress"`
		DeniedMore   *int     `json:"denied_more"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res.ExitCode != 0 {
		t.Fatalf("exec --json: %v (%v)", r, err)
	}
	if len(res.DeniedEgress) != floodKept || res.DeniedMore == nil || *res.DeniedMore != n-floodKept {
		t.Errorf("denied_egress lists %d, denied_more %v; want %d and %d", len(res.DeniedEgress), res.DeniedMore, floodKept, n-floodKept)
	}
	quiet := w.cordon("", "exec", id, "--", "perl", "flood.pl", "1")
	if quiet.code != 0 || strings.Contains(quiet.stderr, "more denied connection attempts") {
		t.Errorf("a command denied once says more: %v", quiet)
	}
	if s := w.cordon("", "session", "stop", id); s.code != 0 {
		t.Fatalf("session stop: %v", s)
	}
	f := tallyFlood(t, sessionEvents(t, w, id))
	if f.itemized[res.Cmd]+f.counted[res.Cmd] != n || f.counted[res.Cmd] == 0 {
		t.Errorf("command %s: itemized %v + counted %v; want %d, some counted", res.Cmd, f.itemized, f.counted, n)
	}
	var all int64
	for _, v := range f.itemized {
		all += v
	}
	for _, v := range f.counted {
		all += v
	}
	if all != n+1 {
		t.Errorf("the session's log accounts for %d denials; want %d", all, n+1)
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Errorf("audit verify: %v", v)
	}
}

// endlessFlood is denied at the proxy until it is killed, one CONNECT to a new made-up
// name at a time, and appends one byte to ARGV[0] for each answer it read: the file's
// size is how many denials the proxy certainly saw (it answers before it logs, and
// logs even when the answer cannot be written, so the log holds that many, or one
// more: the attempt in flight when the kill came). ARGV[1], if given, is a file it
// creates once it has been answered 2000 times, well past the deny budget's burst.
const endlessFlood = `use IO::Socket::INET; use IO::Handle;
my ($count, $past) = @ARGV;
open(my $c, ">>", $count) or die "open: $!"; $c->autoflush(1);
for (my $i = 1; ; $i++) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
  print $s "CONNECT h$i.cut.invalid:443 HTTP/1.1\r\nHost: h$i.cut.invalid:443\r\n\r\n";
  my $status = <$s> // ""; close $s;
  syswrite($c, "x") if $status =~ m{^HTTP/1\.[01] 403 };
  if ($past && $i == 2000) { open(my $p, ">", $past); close $p; }
}
`

// assertFloodAccounted checks that the log accounts for every denial the flooder
// certainly made (the size of its count file), and at most one more.
func assertFloodAccounted(t *testing.T, recs []audit.Record, countFile string) {
	t.Helper()
	st, err := os.Stat(countFile)
	if err != nil {
		t.Fatal(err)
	}
	answered := st.Size()
	f := tallyFlood(t, recs)
	var logged int64
	for _, n := range f.itemized {
		logged += n
	}
	for _, n := range f.counted {
		logged += n
	}
	if answered <= floodBurst || f.summaries == 0 {
		t.Fatalf("the flood did not get past the budget: %d answered, %d summaries", answered, f.summaries)
	}
	if logged < answered || logged > answered+1 {
		t.Errorf("the log accounts for %d denials (itemized %v, counted %v); the flooder was answered %d times", logged, f.itemized, f.counted, answered)
	}
}

// denyCutTimeouts are the timeouts a deny flood is cut short by, tried in turn. The
// flood must outrun the budget (floodBurst, and floodRate a second until the cut) for
// the cut to find denials counted and not yet written; a quiet machine does in the
// first, a busy one may not (a run's timeout also counts its sandbox's start), and the
// next is tried, in a new workspace. The last try is asserted whatever it did: a cut
// that loses the summaries fails there if not before.
var denyCutTimeouts = []string{"2s", "4s", "8s", "16s"}

// TestRedADenyFloodCutShort (red team A): a flood ended from outside, mid-flood, loses
// no count: the command's timeout in a run, the command's timeout in a session, and
// a session stopped while a flooder the previous command left in the background (in
// its own session, setsid) still runs. Every denial the flooder was answered for is a
// net.deny line or counted in a net.deny.summary. On bwrap, Docker and containerd.
func TestRedADenyFloodCutShort(t *testing.T) {
	t.Run("bwrap", testRedADenyFloodCutShort)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedADenyFloodCutShort(t) })
}

func testRedADenyFloodCutShort(t *testing.T) {
	t.Run("run timeout", func(t *testing.T) {
		for i, timeout := range denyCutTimeouts {
			w := newWorld(t)
			w.contract("version: 1\n")
			mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessFlood)
			r := w.cordon("", "run", "--timeout", timeout, "--", "perl", "flood.pl", "count")
			if r.code != 124 {
				t.Fatalf("want the timeout's 124: %v", r)
			}
			recs := lastRun(t, w)
			if i < len(denyCutTimeouts)-1 && tallyFlood(t, recs).summaries == 0 {
				t.Logf("the flood did not get past the budget in %s (a busy machine); trying a longer timeout", timeout)
				continue
			}
			assertFloodAccounted(t, recs, filepath.Join(w.ws, "count"))
			if v := w.cordon("", "audit", "verify", "last"); v.code != 0 {
				t.Errorf("audit verify: %v", v)
			}
			return
		}
	})
	t.Run("session exec timeout", func(t *testing.T) {
		for i, timeout := range denyCutTimeouts {
			w := newWorld(t)
			w.contract("version: 1\n")
			mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessFlood)
			id := w.startSession()
			r := w.cordon("", "exec", id, "--timeout", timeout, "--", "perl", "flood.pl", "count")
			if r.code != 124 {
				t.Fatalf("want the timeout's 124: %v", r)
			}
			if s := w.cordon("", "session", "stop", id); s.code != 0 {
				t.Fatalf("session stop: %v", s)
			}
			recs := sessionEvents(t, w, id)
			if i < len(denyCutTimeouts)-1 && tallyFlood(t, recs).summaries == 0 {
				t.Logf("the flood did not get past the budget in %s (a busy machine); trying a longer timeout", timeout)
				continue
			}
			assertFloodAccounted(t, recs, filepath.Join(w.ws, "count"))
			return
		}
	})
	t.Run("session stop", func(t *testing.T) {
		w := newWorld(t)
		w.contract("version: 1\n")
		mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessFlood)
		id := w.startSession()
		r := w.cordon("", "exec", id, "--", "sh", "-c", "setsid perl flood.pl count past </dev/null >/dev/null 2>&1 &")
		if r.code != 0 {
			t.Fatalf("exec: %v", r)
		}
		waitFor(t, 2*time.Minute, "the flood past its burst", func() bool { _, err := os.Stat(filepath.Join(w.ws, "past")); return err == nil })
		if s := w.cordon("", "session", "stop", id); s.code != 0 {
			t.Fatalf("session stop: %v", s)
		}
		recs := sessionEvents(t, w, id)
		assertFloodAccounted(t, recs, filepath.Join(w.ws, "count"))
		if v := w.cordon("", "audit", "verify", id); v.code != 0 {
			t.Errorf("audit verify: %v", v)
		}
	})
}

// TestRedADenyFloodClientKilled (red team A): cordon-exec, SIGKILLed mid-flood; the
// session ends the command when the connection drops, and its count is kept.
func TestRedADenyFloodClientKilled(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\n")
	mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessFlood)
	id := w.startSession()
	cmd := exec.Command(testutil.CordonExec(t), id, "--", "perl", "flood.pl", "count", "past")
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the flood past its burst", func() bool { _, err := os.Stat(filepath.Join(w.ws, "past")); return err == nil })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The session's next command runs once the killed one has ended.
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Fatalf("exec after the kill: %v", r)
	}
	if s := w.cordon("", "session", "stop", id); s.code != 0 {
		t.Fatalf("session stop: %v", s)
	}
	recs := sessionEvents(t, w, id)
	assertFloodAccounted(t, recs, filepath.Join(w.ws, "count"))
}
