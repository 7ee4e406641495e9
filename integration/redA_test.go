package integration

import (
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
		w := newWorld(t)
		w.contract("version: 1\n")
		mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessFlood)
		r := w.cordon("", "run", "--timeout", "4s", "--", "perl", "flood.pl", "count")
		if r.code != 124 {
			t.Fatalf("want the timeout's 124: %v", r)
		}
		assertFloodAccounted(t, lastRun(t, w), filepath.Join(w.ws, "count"))
		if v := w.cordon("", "audit", "verify", "last"); v.code != 0 {
			t.Errorf("audit verify: %v", v)
		}
	})
	t.Run("session exec timeout", func(t *testing.T) {
		w := newWorld(t)
		w.contract("version: 1\n")
		mustWrite(t, filepath.Join(w.ws, "flood.pl"), endlessFlood)
		id := w.startSession()
		r := w.cordon("", "exec", id, "--timeout", "4s", "--", "perl", "flood.pl", "count")
		if r.code != 124 {
			t.Fatalf("want the timeout's 124: %v", r)
		}
		if s := w.cordon("", "session", "stop", id); s.code != 0 {
			t.Fatalf("session stop: %v", s)
		}
		assertFloodAccounted(t, sessionEvents(t, w, id), filepath.Join(w.ws, "count"))
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

// hostileNames asks the proxy, by SOCKS5 (whose domain is any 255 bytes), for ARGV[0]
// made-up names and then ARGV[1] times for each of four names made to forge the
// reviewer's view: a terminal escape, a line break that would start a forged line, a
// bidi override, a NUL.
const hostileNames = `use IO::Socket::INET;
my ($n, $m) = @ARGV;
my @hostile = ("a\e[2J\e]0;pwned\a.example", "b.example\ncordon: egress allowed: all is well", "c\x{e2}\x{80}\x{ae}lmth.example", "d\x00e.example");
my @names = map { "h$_.flood.invalid" } 1..$n;
push @names, @hostile for 1..$m;
for my $host (@names) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
  print $s "\x05\x01\x00"; read($s, my $m, 2);
  print $s "\x05\x01\x00\x03" . chr(length $host) . $host . "\x01\xbb";
  read($s, my $r, 10); close $s;
}
`

// TestRedAHostileNamesInDenySummary (red team A): destination names the sandbox chose
// reach the reviewer escaped, whether itemized (within the budget) or named among a
// summary's examples (past it: a flood of made-up names spends the budget, then the
// hostile names repeat long enough for a later summary to name them): audit show
// writes no control byte, bidi control or line of theirs; nor does cordon run.
func TestRedAHostileNamesInDenySummary(t *testing.T) {
	for _, within := range []bool{true, false} {
		t.Run(map[bool]string{true: "itemized", false: "summary examples"}[within], func(t *testing.T) {
			w := newWorld(t)
			w.contract("version: 1\n")
			mustWrite(t, filepath.Join(w.ws, "names.pl"), hostileNames)
			args := []string{"0", "1"}
			if !within {
				args = []string{strconv.Itoa(2 * floodBurst), "3000"}
			}
			r := w.cordon("", "run", "--", "perl", "names.pl", args[0], args[1])
			if r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			recs := lastRun(t, w)
			named := within
			for _, rec := range recs {
				var b event.NetDenySummaryBody
				if rec.Type == event.NetDenySummary && rec.DecodeBody(&b) == nil && slices.Contains(b.Examples, "a\x1b[2J\x1b]0;pwned\a.example:443") {
					named = true
				}
			}
			if !named {
				t.Fatalf("no summary names the hostile names among its examples")
			}
			show := w.cordon("", "audit", "show", "last")
			if show.code != 0 {
				t.Fatalf("audit show: %v", show)
			}
			for what, out := range map[string]string{"audit show": show.stdout, "cordon run's stderr": r.stderr} {
				for _, bad := range []string{"\x1b", "\x07", "\x00", "\u202e", "\ncordon: egress allowed"} {
					if strings.Contains(out, bad) {
						t.Errorf("%s writes %q from a name the sandbox chose:\n%s", what, bad, out)
					}
				}
			}
			for _, want := range []string{`a\x1b[2J\x1b]0;pwned\x07.example`, `b.example\x0acordon: egress allowed`, `c\u202elmth.example`, `d\x00e.example`} {
				assertContains(t, "audit show", show.stdout, want)
			}
		})
	}
}

// gateFlood files ARGV[0] requests for the gate named ARGV[1] on the sandbox's gate
// socket, one connection each, and prints how many were answered.
const gateFlood = `use IO::Socket::UNIX;
my ($n, $gate) = @ARGV; my $got = 0;
for my $i (1..$n) {
  my $s = IO::Socket::UNIX->new(Peer => "/run/cordon/gate.sock", Type => SOCK_STREAM) or die "connect: $!";
  print $s "{\"op\":\"request\",\"gate\":\"$gate\"}\n";
  my $l = <$s>; $got++ if defined $l && $l =~ /"outcome"/;
  close $s;
}
print "answered $got of $n\n";
`

// TestRedAGateFloodBounded (red team A): four processes of a session's command ask for
// a gate that is always refused, 6000 times in all. Each was a gate.request and a
// gate.deny line (740 bytes, some 3 MB of log a second, and an Info line in the
// supervisor's log each); now the log itemizes gate.MaxRequests of them and counts the
// rest in one gate.deny at the end, and every request is still answered. On bwrap,
// Docker and containerd.
func TestRedAGateFloodBounded(t *testing.T) {
	t.Run("bwrap", testRedAGateFloodBounded)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedAGateFloodBounded(t) })
}

func testRedAGateFloodBounded(t *testing.T) {
	const gateLimit = 1000 // gate.MaxRequests, which the log must keep
	const procs, each = 4, 1500
	w := newWorld(t)
	w.contract("version: 1\ngates:\n  - {name: release, run: [\"true\"], approve: deny, why: people cut releases}\n")
	mustWrite(t, filepath.Join(w.ws, "gate.pl"), gateFlood)
	id := w.startSession()
	r := w.cordon("", "exec", id, "--", "sh", "-c", "for i in 1 2 3 4; do perl gate.pl "+strconv.Itoa(each)+" release & done; wait")
	if r.code != 0 || strings.Count(r.stdout, "answered "+strconv.Itoa(each)+" of ") != procs {
		t.Fatalf("want every request answered: %v", r)
	}
	if s := w.cordon("", "session", "stop", id); s.code != 0 {
		t.Fatalf("session stop: %v", s)
	}
	recs := sessionEvents(t, w, id)
	n := map[event.Type]int{}
	var count string
	for _, rec := range recs {
		n[rec.Type]++
		var b event.GateDecisionBody
		if rec.Type == event.GateDeny && rec.DecodeBody(&b) == nil && b.ID == "" {
			count = b.Reason
		}
	}
	if n[event.GateRequest] != gateLimit || n[event.GateDeny] != gateLimit+1 {
		t.Errorf("%d gate.request and %d gate.deny lines; want %d and %d", n[event.GateRequest], n[event.GateDeny], gateLimit, gateLimit+1)
	}
	want := strconv.Itoa(procs*each-gateLimit) + " more gate requests refused past the run's limit"
	if !strings.HasPrefix(count, want) {
		t.Errorf("the count's line says %q; want it to begin %q", count, want)
	}
	st, err := os.Stat(filepath.Join(w.auditRoot(), id, audit.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 1<<20 {
		t.Errorf("events.jsonl is %d bytes; want under 1 MiB (unbounded: some 4.4 MB)", st.Size())
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Errorf("audit verify: %v", v)
	}
	assertContains(t, "audit show", w.cordon("", "audit", "show", id).stdout, want)
	for _, args := range [][]string{{"report", id, "-o", filepath.Join(t.TempDir(), "r.html")}, {"export", id, "--format", "ocsf"}} {
		if r := w.cordon("", append([]string{"audit"}, args...)...); r.code != 0 {
			t.Errorf("audit %s: %v", args[0], r)
		}
	}
}

// TestRedACordonExecEscapes (red team A): the strings of a session command's result
// that cordon-exec ends with on the user's terminal, the destinations it was denied
// and the paths of its monitor alerts, are the sandbox's choosing; they arrive escaped.
func TestRedACordonExecEscapes(t *testing.T) {
	w := newWorld(t)
	testutil.RequireRoot(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, mkdir, cp, \"true\"]}\n")
	mustWrite(t, filepath.Join(w.ws, "names.pl"), hostileNames)
	id := w.startSession()
	run := func(argv ...string) result {
		cmd := exec.Command(testutil.CordonExec(t), append([]string{id, "--"}, argv...)...)
		cmd.Dir, cmd.Env = w.ws, w.env
		return runResult(t, cmd, "cordon-exec")
	}
	denied := run("perl", "names.pl", "0", "1")
	// An interpreter monitor.exec does not name, copied into directories with hostile
	// names and run there; its own stderr goes nowhere, so all that is left is
	// cordon-exec's.
	alerted := run("sh", "-c", `for n in "a$(printf '\033[2J\007')b" "c$(printf '\342\200\256')d"; do mkdir "$n" && cp "$(command -v perl)" "$n/perl" && "./$n/perl" -e 1; done 2>/dev/null; true`)
	assertContains(t, "cordon-exec's denials", denied.stderr, `cordon: egress denied: a\x1b[2J\x1b]0;pwned\x07.example:443`)
	assertContains(t, "cordon-exec's alerts", alerted.stderr, `a\x1b[2J\x07b`)
	assertContains(t, "cordon-exec's alerts", alerted.stderr, `c\u202ed`)
	for what, out := range map[string]string{"denials": denied.stderr, "alerts": alerted.stderr} {
		for _, bad := range []string{"\x1b", "\x07", "\x00", "\u202e", "\ncordon: egress allowed"} {
			if strings.Contains(out, bad) {
				t.Errorf("cordon-exec's %s write %q from a name the sandbox chose:\n%s", what, bad, out)
			}
		}
	}
}
