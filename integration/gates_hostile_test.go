package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
)

// TestGateRunsNothingTheSandboxWrote: under git: commit the agent makes a nested
// repository whose filter runs a program, points the index at it as a submodule, and
// plants a link to a host file as packed-refs in a second try; asking, showing and
// approving run none of it on the host, and nothing of the host file comes back.
func TestGateRunsNothingTheSandboxWrote(t *testing.T) {
	g := newGateWorld(t)
	secret := filepath.Join(g.marks, "host-secret")
	mustWrite(t, secret, "TOPSECRET-host-line\n")
	g.contract(strings.Replace(gatesContract, "BARE", g.url, 1) + "filesystem:\n  git: commit\n")
	// A nested repository whose filter runs a program (made before the session: as root,
	// one the sandbox makes is quarantined the moment it appears).
	mark := filepath.Join(g.marks, "ran")
	sub := filepath.Join(g.ws, "sub")
	mustMkdir(t, sub)
	gitIn(t, sub, "init", "-q")
	gitIn(t, sub, "config", "filter.x.clean", "touch "+mark+"; cat")
	mustWrite(t, filepath.Join(sub, ".gitattributes"), "* filter=x\n")
	mustWrite(t, filepath.Join(sub, "f"), "d\n")
	gitIn(t, sub, "add", "f", ".gitattributes")
	gitIn(t, sub, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "s")
	os.Remove(mark)
	h := gitIn(t, sub, "rev-parse", "HEAD")
	id := g.startSession("--gates", "ask")
	r := g.cordon("", "exec", id, "--", "sh", "-c", "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b; "+
		"touch -d 2020-01-01 sub/f && git update-index --add --cacheinfo 160000,"+h+",sub && git commit -qm 'add sub' 2>&1 && echo ok")
	assertContains(t, "setup in the sandbox", r.stdout, "ok")
	b, p := g.askPush(id)
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("asking ran the nested repository's filter on the host")
	}
	g.cordon("", "gate", "show", p.ID)
	if r := g.cordon("", "gate", "approve", p.ID); r.code != 0 {
		t.Fatalf("approve: %v", r)
	}
	if res := b.wait(t); res.code != 0 {
		t.Fatalf("the push failed: %v", res)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the gate ran the nested repository's filter on the host")
	}
	r = g.cordon("", "exec", id, "--", "sh", "-c", "git pack-refs --all; rm .git/packed-refs; ln -s "+secret+" .git/packed-refs; cordon gate push 2>&1; echo done")
	assertContains(t, "second request", r.stdout, "done")
	if strings.Contains(r.stdout, "TOPSECRET") || !strings.Contains(r.stdout, "cannot be read") {
		t.Fatalf("a link out of .git: want a refusal that repeats nothing: %v", r)
	}
	g.cordon("", "session", "stop", id)
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

// TestRedAGateFloodBounded (red team A): processes of a session's command ask for a
// gate that is always refused, past the run's limit (the red team's flood was 6000
// requests from four; the test's is 1400 from two, the same class). Each was a gate.request and a
// gate.deny line (740 bytes, some 3 MB of log a second, and an Info line in the
// supervisor's log each); now the log itemizes gate.MaxRequests of them and counts the
// rest in one gate.deny at the end, and every request is still answered. On bwrap,
// Docker and containerd.
func TestRedAGateFloodBounded(t *testing.T) {
	t.Run("bwrap", testRedAGateFloodBounded)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedAGateFloodBounded(t) })
}

func testRedAGateFloodBounded(t *testing.T) {
	const gateLimit = 1000     // gate.MaxRequests, which the log must keep
	const procs, each = 2, 700 // past the limit from two processes at once
	w := newWorld(t)
	w.contract("version: 1\ngates:\n  - {name: release, run: [\"true\"], approve: deny, why: people cut releases}\n")
	mustWrite(t, filepath.Join(w.ws, "gate.pl"), gateFlood)
	id := w.startSession()
	r := w.cordon("", "exec", id, "--", "sh", "-c", "for i in $(seq "+strconv.Itoa(procs)+"); do perl gate.pl "+strconv.Itoa(each)+" release & done; wait")
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
