package integration

import (
	"strings"
	"testing"
)

// TestEgressListenerHandedOver: on every backend, in a one-command run and in a
// session, the sandbox's proxy clients reach the egress proxy on 127.0.0.1:3128 in the
// sandbox's own network namespace (the listener process 1 made and handed over), with
// no unix socket of the proxy's inside; on a kept-alive connection each plain-HTTP
// request is still checked on its own.
func TestEgressListenerHandedOver(t *testing.T) {
	t.Run("bwrap", testEgressListenerHandedOver)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testEgressListenerHandedOver(t) })
}

func testEgressListenerHandedOver(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	hello := "http://127.0.0.2:" + up.port + "/hello"
	// 0100007F:0C38 ... 0A: a socket listening on 127.0.0.1:3128 in this namespace.
	script := `test -e /run/cordon/egress.sock && echo egress.sock is there
grep -q ' 0100007F:0C38 00000000:0000 0A ' /proc/net/tcp && echo listening inside
curl -sS --max-time 10 -w ' connects=%{num_connects}\n' ` + hello + ` http://denied.example:` + up.port + `/x`
	check := func(what string, r result) {
		t.Helper()
		if r.code != 0 || strings.Contains(r.stdout, "egress.sock") || !strings.Contains(r.stdout, "listening inside") {
			t.Errorf("%s: want the proxy's listener inside and no egress.sock: %v", what, r)
		}
		// The second request reuses the proxy connection (0 new connects) and is
		// refused by itself.
		if !strings.Contains(r.stdout, "hello from upstream\n connects=1") || !strings.Contains(r.stdout, " connects=0") ||
			!strings.Contains(r.stderr, "denied.example") {
			t.Errorf("%s: want the allowed request served and the denied one refused on the same connection: %v", what, r)
		}
	}
	check("run", w.sh(script))
	id := w.startSession()
	for i := range 2 {
		check("session exec "+string(rune('1'+i)), w.cordon("", "exec", id, "--", "sh", "-c", script))
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Errorf("session stop: %v", r)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("upstream saw %d requests; want 3 (the denied ones never reach it)", got)
	}
}
