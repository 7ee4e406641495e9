package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

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
