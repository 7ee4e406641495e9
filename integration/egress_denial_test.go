package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestEgressDenialExplained checks what a denied agent is told, seen from inside the
// sandbox and on cordon's own stderr: curl's CONNECT status line, the plain-HTTP header
// and body, the run's summary line per destination, and exec --json's `denied`.
func TestEgressDenialExplained(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	other := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	hostRule := "network.allow: [{host: denied.example, ports: [443]}]"
	cidrRule := "network.allow: [{cidr: 127.0.0.2/32, ports: [" + other.port + "]}]"
	r := w.sh("curl -sSv https://denied.example/; curl -sS -D - http://127.0.0.2:" + other.port + "/hello; true")
	assertContains(t, "curl -v", r.stderr, "< HTTP/1.1 403 cordon: denied.example:443 not in network.allow")
	assertContains(t, "plain http header", r.stdout, "X-Cordon-Denied: port not allowed")
	assertContains(t, "plain http header", r.stdout, "X-Cordon-Allow-Rule: "+cidrRule)
	assertContains(t, "plain http body", r.stdout, "cordon: to allow it, add to the contract: "+cidrRule+"\n")
	assertContains(t, "run stderr", r.stderr,
		"cordon: egress denied: denied.example:443 (not in network.allow; to allow: "+hostRule+")\n")
	assertContains(t, "run stderr", r.stderr,
		"cordon: egress denied: 127.0.0.2:"+other.port+" (port not allowed; to allow: "+cidrRule+")\n")
	if n := strings.Count(r.stderr, "cordon: egress denied:"); n != 2 {
		t.Errorf("want one line per denied destination, got %d: %s", n, r.stderr)
	}
	for _, secret := range []string{"allowed.example.com", "127.0.0.0/8", "test servers"} {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("the denial shows the contract's other rule (%q): %v", secret, r)
		}
	}
	if other.hits.Load() != 0 {
		t.Error("the denied request reached its upstream")
	}

	id := w.startSession()
	r = w.cordon("", "exec", id, "--", "wget", "-q", "-O", "/dev/null", "http://denied.example:8080/")
	assertContains(t, "exec stderr", r.stderr,
		"cordon: egress denied: denied.example:8080 (not in network.allow; to allow: network.allow: [{host: denied.example, ports: [8080]}])\n")
	r = w.cordon("", "exec", id, "--json", "--", "sh", "-c",
		"wget -q -O /dev/null http://denied.example:8080/; wget -q -O /dev/null http://denied.example:8080/; true")
	var js struct {
		V            int      `json:"v"`
		DeniedEgress []string `json:"denied_egress"`
		Denied       []struct {
			Destination   string `json:"destination"`
			Reason        string `json:"reason"`
			SuggestedRule string `json:"suggested_rule"`
		} `json:"denied"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatalf("exec --json: %v: %v", err, r)
	}
	if js.V != 1 || !reflect.DeepEqual(js.DeniedEgress, []string{"denied.example:8080", "denied.example:8080"}) ||
		len(js.Denied) != 1 || js.Denied[0].Destination != "denied.example:8080" ||
		js.Denied[0].Reason != "not in network.allow" ||
		js.Denied[0].SuggestedRule != "network.allow: [{host: denied.example, ports: [8080]}]" {
		t.Errorf("exec --json denied: %+v from %s", js, r.stdout)
	}
	if strings.Contains(r.stderr, "cordon: egress denied:") {
		t.Errorf("exec --json printed the summary on stderr too: %q", r.stderr)
	}
}

// TestEgressDenialSeenByClients checks what the clients agents use print for a denied
// HTTPS destination: go's net/http and npm show the CONNECT reason phrase, git only the
// status (libcurl drops the phrase), so cordon's own summary line is what tells it why.
func TestEgressDenialSeenByClients(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	_, err := exec.LookPath("npm")
	testutil.Require(t, err == nil, "npm is needed (apt-get install npm)")
	src := filepath.Join(w.ws, "getter.go")
	mustWrite(t, src, "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n\t\"os\"\n)\n\n"+
		"func main() {\n\t_, err := http.Get(os.Args[1])\n\tfmt.Println(err)\n}\n")
	build := exec.Command("go", "build", "-o", filepath.Join(w.ws, "getter"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the go client: %v\n%s", err, out)
	}
	const phrase = "cordon: denied.example:443 not in network.allow"
	r := w.sh("./getter https://denied.example/; " +
		"git ls-remote https://denied.example/repo 2>&1; " +
		"npm view left-pad --registry https://denied.example/ --cache ./.npm-cache 2>&1; true")
	assertContains(t, "go net/http", r.stdout, `Get "https://denied.example/": `+phrase)
	assertContains(t, "git", r.stdout, "CONNECT tunnel failed, response 403")
	assertContains(t, "npm", r.stdout, "403 "+phrase)
	assertContains(t, "run stderr", r.stderr,
		"cordon: egress denied: denied.example:443 (not in network.allow; to allow: network.allow: [{host: denied.example, ports: [443]}])\n")
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
