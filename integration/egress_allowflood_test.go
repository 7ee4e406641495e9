package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// allowFlood makes ARGV[0] allowed CONNECTs, one connection each, each waiting for its
// answer, to port 9 of 40 loopback addresses where nothing listens (the red team's
// flood: a log line each, no byte moved), then ARGV[1] kept-alive plain-HTTP requests
// on one connection to the allowed server at 127.0.0.2:ARGV[2]. It prints how many
// were answered and how many response-body bytes it read.
const allowFlood = `use IO::Socket::INET;
my ($n, $m, $port) = @ARGV;
my ($answered, $ok, $body) = (0, 0, 0);
for my $i (1..$n) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
  my $d = "127.0.0." . (3 + $i % 40) . ":9";
  print $s "CONNECT $d HTTP/1.1\r\nHost: $d\r\n\r\n";
  my $status = <$s> // ""; close $s;
  $answered++ if $status =~ m{^HTTP/1\.[01] [0-9]};
}
my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
for my $i (1..$m) {
  print $s "GET http://127.0.0.2:$port/hello HTTP/1.1\r\nHost: 127.0.0.2:$port\r\n\r\n";
  my $status = <$s> // last; my $len = 0;
  while (my $h = <$s>) { last if $h eq "\r\n"; $len = $1 if $h =~ /^Content-Length:\s*(\d+)/i; }
  read($s, my $b, $len); $body += length $b; $ok++ if $status =~ m{^HTTP/1\.[01] 200 };
}
print "answered $answered ok $ok body $body\n";
`

// Figures of the run's allow budget (runner/tally/allowbudget.go), which the log must keep.
const (
	allowFloodBurst = 2000 // net.allow lines itemized at once
	allowFloodRate  = 100  // a second, after that
)

// allowTally is what a log says of allowed attempts: the net.allow lines, and what the
// net.allow.summary lines count.
type allowTally struct {
	itemized, counted int64
	down              int64 // bytes down, itemized and counted
	summaries         int
	first, last       time.Time // of the net.allow lines
	named             map[string]bool
}

func tallyAllowed(t *testing.T, recs []audit.Record) allowTally {
	t.Helper()
	a := allowTally{named: map[string]bool{}}
	for _, rec := range recs {
		switch rec.Type {
		case event.NetAllow:
			var b event.NetBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatalf("net.allow body: %v: %s", err, rec.Body)
			}
			a.itemized++
			a.down += b.BytesDown
			if a.first.IsZero() {
				a.first = rec.TS
			}
			a.last = rec.TS
		case event.NetAllowSummary:
			var b event.NetAllowSummaryBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatalf("net.allow.summary body: %v: %s", err, rec.Body)
			}
			var sum event.AllowedTo
			if b.Other != nil {
				sum = *b.Other
			}
			for d, to := range b.Named {
				a.named[d] = true
				sum.Attempts += to.Attempts
				sum.BytesDown += to.BytesDown
			}
			if b.Allowed <= 0 || b.First.After(b.Last) || sum.Attempts != b.Allowed || sum.BytesDown != b.BytesDown {
				t.Errorf("a summary that counts nothing, is out of order, or whose destinations do not add up: %s", rec.Body)
			}
			a.counted += b.Allowed
			a.down += b.BytesDown
			a.summaries++
		}
	}
	return a
}

// TestAllowFloodBounded (red team, allowflood): one command makes 4,000 allowed
// CONNECTs to a port with nothing listening and 1,000 kept-alive plain-HTTP requests
// to an allowed server (two and a half times the budget's burst; the red team's flood
// was 16,000), and another is then denied 500 times. The log itemizes the
// allow budget's burst and rate and counts the rest in net.allow.summary lines: the
// two add up to every attempt the flooder was answered for (or one more, in flight),
// their bytes down to every byte it read, every destination it reached is named; the
// log is no more than that (assertLogBounded), it verifies, and the denials, on a
// budget of their own, are each itemized.
func TestAllowFloodBounded(t *testing.T) {
	t.Run("bwrap", testAllowFloodBounded)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testAllowFloodBounded(t) })
}

func testAllowFloodBounded(t *testing.T) {
	const n, m, denials = 4000, 1000, 500
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract("9", up.port)
	mustWrite(t, filepath.Join(w.ws, "allow.pl"), allowFlood)
	mustWrite(t, filepath.Join(w.ws, "deny.pl"), denyFlood)
	r := w.sh("perl allow.pl " + strconv.Itoa(n) + " " + strconv.Itoa(m) + " " + up.port + " && perl deny.pl " + strconv.Itoa(denials))
	got := regexp.MustCompile(`answered (\d+) ok (\d+) body (\d+)`).FindStringSubmatch(r.stdout)
	if r.code != 0 || got == nil {
		t.Fatalf("flood: %v", r)
	}
	answered, _ := strconv.ParseInt(got[1], 10, 64)
	ok, _ := strconv.ParseInt(got[2], 10, 64)
	body, _ := strconv.ParseInt(got[3], 10, 64)
	if answered != n || ok != m || body != m*int64(len("hello from upstream\n")) {
		t.Fatalf("want every CONNECT answered and every request served: %v", r)
	}
	assertContains(t, "stdout", r.stdout, "denied 500 of 500")
	recs := lastRun(t, w)
	a := tallyAllowed(t, recs)
	if a.summaries == 0 {
		t.Errorf("no net.allow.summary line (%d net.allow lines)", a.itemized)
	}
	if all := a.itemized + a.counted; all < n+m || all > n+m+1 {
		t.Errorf("itemized %d + counted %d = %d allowed attempts; the flooder was answered %d times", a.itemized, a.counted, all, n+m)
	}
	if a.down != body {
		t.Errorf("the log accounts for %d bytes down; the flooder read %d", a.down, body)
	}
	// The token bucket's own bound, over the time the log itself records.
	if bound := allowFloodBurst + int64(a.last.Sub(a.first).Seconds()*allowFloodRate) + 1; a.itemized > bound {
		t.Errorf("%d net.allow lines over %s; the budget allows %d", a.itemized, a.last.Sub(a.first), bound)
	}
	// Every destination reached is named, in a net.allow line or in a summary.
	for _, rec := range recs {
		if rec.Type == event.NetAllow {
			var b event.NetBody
			_ = rec.DecodeBody(&b)
			a.named[b.Host+":"+strconv.Itoa(int(b.Port))] = true
		}
	}
	for i := range 40 {
		if d := "127.0.0." + strconv.Itoa(3+i) + ":9"; !a.named[d] {
			t.Errorf("%s reached but named nowhere in the log", d)
		}
	}
	if !a.named["127.0.0.2:"+up.port] {
		t.Errorf("the HTTP server reached but named nowhere in the log")
	}
	// The denials after it, on their own budget, are each itemized.
	f := tallyFlood(t, recs)
	var denied, counted int64
	for _, v := range f.itemized {
		denied += v
	}
	for _, v := range f.counted {
		counted += v
	}
	if denied != denials || counted != 0 {
		t.Errorf("after the allow flood, %d denials itemized, %d counted; want all %d itemized", denied, counted, denials)
	}
	runs, err := audit.List(w.auditRoot())
	if err != nil || len(runs) == 0 {
		t.Fatal(err)
	}
	assertLogBounded(t, filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile), a.itemized+denied, a.summaries, event.NetAllow, event.NetDeny)
	t.Logf("%d net.allow lines, %d net.allow.summary lines counting %d", a.itemized, a.summaries, a.counted)
	if v := w.cordon("", "audit", "verify", "last"); v.code != 0 {
		t.Errorf("audit verify: %v", v)
	}
	show := w.cordon("", "audit", "show", "last")
	if !regexp.MustCompile(`(?m)^    allow  \d+ more, not itemized \(past the log's budget\)`).MatchString(show.stdout) {
		t.Errorf("audit show lists no net.allow.summary (%d bytes of output)", len(show.stdout))
	}
}

// endlessAllowFlood makes allowed CONNECTs to 127.0.0.3:9, where nothing listens,
// until it is killed, and appends one byte to ARGV[0] for each answer it read: the
// file's size is how many allowed attempts the proxy certainly saw (the log holds that
// many, or one more: the attempt in flight when the kill came). ARGV[1], if given, is a
// file it creates once it has been answered 3000 times, past the allow budget's burst.
const endlessAllowFlood = `use IO::Socket::INET; use IO::Handle;
my ($count, $past) = @ARGV;
open(my $c, ">>", $count) or die "open: $!"; $c->autoflush(1);
for (my $i = 1; ; $i++) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
  print $s "CONNECT 127.0.0.3:9 HTTP/1.1\r\nHost: 127.0.0.3:9\r\n\r\n";
  my $status = <$s> // ""; close $s;
  syswrite($c, "x") if $status =~ m{^HTTP/1\.[01] [0-9]};
  if ($past && $i == 3000) { open(my $p, ">", $past); close $p; }
}
`

// assertAllowFloodAccounted checks that the log accounts for every allowed attempt the
// flooder certainly made (the size of its count file), and at most one more.
func assertAllowFloodAccounted(t *testing.T, recs []audit.Record, countFile string) {
	t.Helper()
	st, err := os.Stat(countFile)
	if err != nil {
		t.Fatal(err)
	}
	answered := st.Size()
	a := tallyAllowed(t, recs)
	if answered <= allowFloodBurst || a.summaries == 0 {
		t.Fatalf("the flood did not get past the budget: %d answered, %d summaries", answered, a.summaries)
	}
	if logged := a.itemized + a.counted; logged < answered || logged > answered+1 {
		t.Errorf("the log accounts for %d allowed attempts (itemized %d, counted %d); the flooder was answered %d times", logged, a.itemized, a.counted, answered)
	}
}

// TestAllowFloodCutShort: an allow flood ended from outside, mid-flood, loses no count:
// the command's timeout in a run, a session stopped while a flooder left in the
// background still runs, and cordon-exec SIGKILLed. Every allowed attempt the flooder
// was answered for is a net.allow line or counted in a net.allow.summary. On bwrap,
// Docker and containerd.
func TestAllowFloodCutShort(t *testing.T) {
	t.Run("bwrap", testAllowFloodCutShort)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testAllowFloodCutShort(t) })
}

func testAllowFloodCutShort(t *testing.T) {
	t.Run("run timeout", func(t *testing.T) {
		// The flood must outrun the budget's refill (allowFloodRate) before the timeout
		// cuts it: on a busy machine it may not in 4 s, and a longer timeout is tried.
		for _, timeout := range []string{"4s", "8s", "16s"} {
			w := newWorld(t)
			w.egressContract("9")
			mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessAllowFlood)
			r := w.cordon("", "run", "--timeout", timeout, "--", "perl", "flood.pl", "count")
			if r.code != 124 {
				t.Fatalf("want the timeout's 124: %v", r)
			}
			recs := lastRun(t, w)
			if timeout != "16s" && tallyAllowed(t, recs).summaries == 0 {
				t.Logf("the flood did not get past the budget in %s (a busy machine); trying a longer timeout", timeout)
				continue
			}
			assertAllowFloodAccounted(t, recs, filepath.Join(w.ws, "count"))
			if v := w.cordon("", "audit", "verify", "last"); v.code != 0 {
				t.Errorf("audit verify: %v", v)
			}
			return
		}
	})
	t.Run("session stop", func(t *testing.T) {
		w := newWorld(t)
		w.egressContract("9")
		mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessAllowFlood)
		id := w.startSession()
		r := w.cordon("", "exec", id, "--", "sh", "-c", "setsid perl flood.pl count past </dev/null >/dev/null 2>&1 &")
		if r.code != 0 {
			t.Fatalf("exec: %v", r)
		}
		waitFor(t, 2*time.Minute, "the flood past its burst", func() bool { _, err := os.Stat(filepath.Join(w.ws, "past")); return err == nil })
		if s := w.cordon("", "session", "stop", id); s.code != 0 {
			t.Fatalf("session stop: %v", s)
		}
		assertAllowFloodAccounted(t, sessionEvents(t, w, id), filepath.Join(w.ws, "count"))
		if v := w.cordon("", "audit", "verify", id); v.code != 0 {
			t.Errorf("audit verify: %v", v)
		}
	})
	t.Run("cordon-exec killed", func(t *testing.T) {
		w := newWorld(t)
		w.egressContract("9")
		mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessAllowFlood)
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
		if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
			t.Fatalf("exec after the kill: %v", r)
		}
		if s := w.cordon("", "session", "stop", id); s.code != 0 {
			t.Fatalf("session stop: %v", s)
		}
		assertAllowFloodAccounted(t, sessionEvents(t, w, id), filepath.Join(w.ws, "count"))
	})
}
