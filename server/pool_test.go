package server

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/server/config"
)

// TestCheckPoolQuotas: a config whose pools could never fill is refused when the
// server is made: a pool asking more than the tenant's whole quota, or pools whose
// warm sessions together ask more memory, pids or CPU than the tenant has.
func TestCheckPoolQuotas(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(`version: 1
listen: {unix: {path: /run/c.sock}}
tenants:
  - name: acme
    root: /srv/acme
    quotas: {sessions: 8, memory: 1GiB, pids: 1000, cpu: 2}
    credentials: [{name: ci, roles: [agent], uid: 1000}]
    pools:
      - {name: a, size: 1}
      - {name: b, size: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	lim := func(mem int64, pids int64, cpu float64) contract.LimitsPlan {
		return contract.LimitsPlan{Memory: mem, Pids: pids, CPU: cpu}
	}
	ps := cfg.Tenants[0].Pools
	ps[0].Limits, ps[1].Limits = lim(256<<20, 100, 0.5), lim(256<<20, 100, 0.5)
	if err := checkPoolQuotas(cfg); err != nil {
		t.Errorf("4 sessions of 256MiB in 1GiB: %v", err)
	}
	ps[1].Limits = lim(300<<20, 100, 0.5)
	if err := checkPoolQuotas(cfg); err == nil || !strings.Contains(err.Error(), `t.yaml:4:5: tenant "acme": its pools' warm sessions ask 1156MiB of quotas.memory together, more than its 1024MiB`) {
		t.Errorf("1.14GiB of pools in 1GiB: %v", err)
	}
	ps[1].Limits = lim(256<<20, 100, 0.6)
	if err := checkPoolQuotas(cfg); err == nil || !strings.Contains(err.Error(), "of quotas.cpu together") {
		t.Errorf("2.3 CPUs of pools in 2: %v", err)
	}
	ps[1].Limits = lim(2<<30, 100, 0.5)
	if err := checkPoolQuotas(cfg); err == nil || !strings.Contains(err.Error(), `tenant "acme": pool "b": `) || !strings.Contains(err.Error(), "more than the tenant's whole quota") {
		t.Errorf("a pool of 2GiB sessions in 1GiB: %v", err)
	}
}

// TestPoolWarmGauge: cordon_pool_warm counts only what a claim would take. A warm
// session's record is written at its launch, before it is charged and on its pool's
// list; a listed one not charged (being launched, or its charge given back) is not
// claimable, nor is a charged one that does not run (no supervisor here).
func TestPoolWarmGauge(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(`version: 1
listen: {unix: {path: /run/c.sock}}
tenants:
  - name: acme
    root: /srv/acme
    quotas: {disk: host}
    credentials: [{name: ci, roles: [agent], uid: 1000}]
    pools: [{name: py, size: 2}]
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tenants[0].Pools[0].Limits = contract.LimitsPlan{Memory: 256 << 20, Pids: 100, CPU: 0.5}
	s, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const line = `cordon_pool_warm{pool="py",tenant="acme"} `
	if got := scrape(t, s); !hasLine(got, line+"0") {
		t.Fatalf("no %s0 before any warm session:\n%s", line, got)
	}
	rec := sessionRecord{ID: "s-1", Workspace: warmPrefix + "0123456789abcdef", Warm: true, Pool: "py"}
	s.sess.mu.Lock()
	s.sess.warm = map[string][]sessionRecord{poolKey("acme", "py"): {rec}}
	s.sess.mu.Unlock()
	if got := scrape(t, s); !hasLine(got, line+"0") {
		t.Errorf("a listed warm session not charged counted as claimable:\n%s", got)
	}
	s.hold(cfg.Tenants[0], rec, func() {})
	if got := scrape(t, s); !hasLine(got, line+"0") {
		t.Errorf("a warm session with no running supervisor counted as claimable:\n%s", got)
	}
	if _, ok := s.claim(tenantRootsOf(cfg.Tenants[0]), cfg.Tenants[0].Pools[0], ""); ok {
		t.Error("claim took a session the gauge does not count")
	}
}
