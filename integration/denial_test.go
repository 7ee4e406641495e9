package integration

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
