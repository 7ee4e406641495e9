package server

import (
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
