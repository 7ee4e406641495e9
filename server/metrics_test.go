package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/server/quota"
	"github.com/cordonhq/cordon/session/wire"
)

func scrape(t *testing.T, s *Server) string {
	t.Helper()
	w := httptest.NewRecorder()
	s.metrics.handler(s.log).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String()
}

type sessionCounts map[string]int

func (c sessionCounts) Sessions() map[string]int { return c }

// TestMetricsCount: requests are counted and timed by route pattern, method and
// status, never by the raw path (an id is no label) nor by a method a client made up;
// the sessions gauge reports the config's tenants only.
func TestMetricsCount(t *testing.T) {
	c := newConformance(t)
	before := scrape(t, c.s)
	for range 2 {
		c.do("GET", "/v1/whoami", api.RoleAgent, "", "", 0)
	}
	c.do("GET", "/v1/sessions/secret-id-1", "", "", "", 0)
	c.do("GET", "/v1/sessions/secret-id-2/nope", api.RoleAgent, "", "", 0)
	c.do("BREW", "/v1/health", "", "", "", 0)
	c.countSessionsAndCheck(t)
	after := scrape(t, c.s)
	for _, line := range []string{
		`cordon_http_requests_total{code="200",method="GET",route="GET /v1/whoami"} 2`,
		`cordon_http_request_duration_seconds_count{method="GET",route="GET /v1/whoami"} 2`,
		`cordon_http_requests_total{code="401",method="GET",route="GET /v1/sessions/{id}"} 1`,
		`cordon_http_requests_total{code="404",method="GET",route="none"} 1`,
		`cordon_http_requests_total{code="405",method="other",route="none"} 1`,
		`cordon_http_requests_in_flight 0`,
		`cordon_sessions{tenant="acme"} 3`,
	} {
		if !hasLine(after, line) {
			t.Errorf("no line %s", line)
		}
		if hasLine(before, line) && !strings.Contains(line, "in_flight") {
			t.Errorf("%s before any request", line)
		}
	}
	for _, no := range []string{"secret-id", "BREW", "ghost"} {
		if strings.Contains(after, no) {
			t.Errorf("the metrics hold %q", no)
		}
	}
}

func (c *conformance) countSessionsAndCheck(t *testing.T) {
	if got := scrape(t, c.s); !hasLine(got, `cordon_sessions{tenant="acme"} 0`) {
		t.Errorf("a server with no live session reports:\n%s", got)
	}
	c.s.metrics.countSessions(sessionCounts{"acme": 3, "ghost": 9})
}

func hasLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimSuffix(l, "\n") == line {
			return true
		}
	}
	return false
}

// TestServeMetricsListener: with listen.metrics, Serve serves GET /metrics there
// (with each listener's open connections) and nothing else, and stops it with the rest.
func TestServeMetricsListener(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	sock := filepath.Join(sockDir(t), "c.sock")
	cfg, err := config.Parse("t.yaml", []byte("version: 1\nlisten: {unix: {path: "+sock+"}, metrics: {address: '"+addr+"'}}\ntenants: [{name: a, root: /srv/a, quotas: {disk: host}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	code, body := get("/metrics")
	for code != http.StatusOK && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		code, body = get("/metrics")
	}
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	for _, want := range []string{`cordon_connections_open{listener="unix"} 0`, `cordon_connections_open{listener="metrics"} 1`, "go_goroutines ", "process_resident_memory_bytes "} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape has no %s:\n%s", want, body)
		}
	}
	for _, p := range []string{"/v1/health", "/v1/whoami", "/", "/metrics/x"} {
		if code, _ := get(p); code != http.StatusNotFound {
			t.Errorf("GET %s on the metrics listener: %d; want 404", p, code)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return")
	}
	hc.CloseIdleConnections()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the metrics listener still accepts after Serve returned")
	}
}

// TestTenantMetrics: execs are counted by outcome and timed, their egress denials
// summed, pool claims and quota refusals counted, per tenant of the config only; a
// tenant or quota name the config does not have makes no series.
func TestTenantMetrics(t *testing.T) {
	s, _ := testServer(t)
	s.metrics.declarePool("acme", "py") // as New does for each pool of the config
	before := scrape(t, s)
	for _, line := range []string{
		`cordon_execs_total{outcome="ok",tenant="acme"} 0`,
		`cordon_pool_claims_total{pool="py",result="miss",tenant="acme"} 0`,
		`cordon_quota_refusals_total{quota="memory",tenant="acme"} 0`,
		`cordon_egress_denials_total{tenant="acme"} 0`,
	} {
		if !hasLine(before, line) {
			t.Errorf("no line %s before any session", line)
		}
	}
	m := s.metrics
	m.exec("acme", &wire.Result{ExitCode: 0}, false, 20*time.Millisecond)
	m.exec("acme", &wire.Result{ExitCode: 2, DeniedEgress: []string{"evil.example:443", "evil.example:443"}, DeniedMore: 3}, false, time.Second)
	m.exec("acme", &wire.Result{ExitCode: 124, TimedOut: true}, false, time.Second)
	m.exec("acme", &wire.Result{ExitCode: 137, Reason: "monitor"}, false, time.Second)
	m.exec("acme", nil, false, time.Millisecond)
	m.exec("acme", nil, true, time.Millisecond)
	m.poolClaim("acme", "py", true)
	m.poolClaim("acme", "py", false)
	m.poolClaim("acme", "py", false)
	m.poolClaim("acme", "made-up", true)
	m.refused("acme", quota.Memory)
	m.refused("acme", "made-up")
	for _, ghost := range []string{"ghost", ""} {
		m.exec(ghost, &wire.Result{DeniedEgress: []string{"x:1"}}, false, time.Second)
		m.poolClaim(ghost, "py", true)
		m.refused(ghost, quota.CPU)
		m.seal(ghost, true)
	}
	after := scrape(t, s)
	for _, line := range []string{
		`cordon_execs_total{outcome="ok",tenant="acme"} 1`,
		`cordon_execs_total{outcome="failed",tenant="acme"} 1`,
		`cordon_execs_total{outcome="timeout",tenant="acme"} 1`,
		`cordon_execs_total{outcome="monitor",tenant="acme"} 1`,
		`cordon_execs_total{outcome="error",tenant="acme"} 1`,
		`cordon_execs_total{outcome="canceled",tenant="acme"} 1`,
		`cordon_exec_duration_seconds_count{tenant="acme"} 6`,
		`cordon_egress_denials_total{tenant="acme"} 5`,
		`cordon_pool_claims_total{pool="py",result="hit",tenant="acme"} 1`,
		`cordon_pool_claims_total{pool="py",result="miss",tenant="acme"} 2`,
		`cordon_quota_refusals_total{quota="memory",tenant="acme"} 1`,
		`cordon_quota_refusals_total{quota="other",tenant="acme"} 1`,
	} {
		if !hasLine(after, line) {
			t.Errorf("no line %s", line)
		}
	}
	for _, no := range []string{"ghost", `tenant=""`, "made-up"} {
		if strings.Contains(after, no) {
			t.Errorf("the metrics hold %q", no)
		}
	}
}
