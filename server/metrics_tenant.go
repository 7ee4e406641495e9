package server

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/server/quota"
	"github.com/cordonhq/cordon/session/wire"
)

// Label values of the per-tenant metrics. Every label is the config's (a tenant's
// name) or one of these words: nothing a client sends becomes a label value, so the
// series are bounded by the config.
const (
	outcomeOK       = "ok"       // the command exited 0
	outcomeFailed   = "failed"   // it exited non-zero
	outcomeTimeout  = "timeout"  // its timeout killed it
	outcomeMonitor  = "monitor"  // the syscall monitor stopped it
	outcomeError    = "error"    // cordon could not run it (an error frame)
	outcomeCanceled = "canceled" // the client went away before the result
	resultHit       = "hit"
	resultMiss      = "miss"
	resultSealed    = "sealed"
	resultFailed    = "failed"
	quotaOther      = "other"
)

var (
	execOutcomes = []string{outcomeOK, outcomeFailed, outcomeTimeout, outcomeMonitor, outcomeError, outcomeCanceled}
	quotaNames   = []string{quota.Sessions, quota.Memory, quota.Pids, quota.CPU, quota.Audit, quota.Disk, workspacesQuota, heldQuota, serverHeldQuota, logDocsQuota, serverLogDocsQuota, mcpBodiesQuota, serverMCPBodiesQuota}
)

// tenantMetrics are the per-tenant counts of the sessions API. Only the config's
// tenants are counted; every series of each exists from the start, at 0.
type tenantMetrics struct {
	tenants  map[string]bool
	pools    map[string]bool // by poolKey: the pools of the config
	execs    *prometheus.CounterVec
	execTime *prometheus.HistogramVec
	pool     *prometheus.CounterVec
	refusals *prometheus.CounterVec
	denials  *prometheus.CounterVec
	seals    *prometheus.CounterVec
	warm     *warmCollector
}

func newTenantMetrics(tenants []string) *tenantMetrics {
	m := &tenantMetrics{
		tenants: map[string]bool{},
		pools:   map[string]bool{},
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cordon_execs_total",
			Help: "Commands run in sessions, by tenant and outcome (ok, failed, timeout, monitor, error, canceled).",
		}, []string{"tenant", "outcome"}),
		execTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cordon_exec_duration_seconds",
			Help:    "Time from an exec request to its result, by tenant.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10), // 10 ms to 44 min
		}, []string{"tenant"}),
		pool: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cordon_pool_claims_total",
			Help: "Starts that could take a warm session, by tenant, pool and result (hit: one was ready; miss: a cold start, counted on the first pool the start could claim from).",
		}, []string{"tenant", "pool", "result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cordon_quota_refusals_total",
			Help: "Requests refused (429) past a quota, by tenant and quota.",
		}, []string{"tenant", "quota"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cordon_egress_denials_total",
			Help: "Connections the egress proxy refused to commands of sessions, by tenant (from each exec's result).",
		}, []string{"tenant"}),
		seals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cordon_dead_sessions_total",
			Help: "Sessions found with their supervisor dead and collected, by tenant and whether their log could be sealed (sealed, failed).",
		}, []string{"tenant", "result"}),
		warm: &warmCollector{desc: prometheus.NewDesc("cordon_pool_warm",
			"Warm sessions a start could claim now, by tenant and pool (started, charged, running, on the pool's list).", []string{"tenant", "pool"}, nil)},
	}
	for _, t := range tenants {
		m.tenants[t] = true
		for _, o := range execOutcomes {
			m.execs.WithLabelValues(t, o)
		}
		m.execTime.WithLabelValues(t)
		for _, q := range append(quotaNames, quotaOther) {
			m.refusals.WithLabelValues(t, q)
		}
		m.denials.WithLabelValues(t)
		m.seals.WithLabelValues(t, resultSealed)
		m.seals.WithLabelValues(t, resultFailed)
	}
	return m
}

func (m *tenantMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.execs, m.execTime, m.pool, m.refusals, m.denials, m.seals, m.warm}
}

// warmCollector reports each declared pool's claimable warm sessions when scraped,
// from a count by poolKey (0 for a pool the count does not name).
type warmCollector struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	pools [][2]string           // mu guards pools and count: tenant and pool, in the config's order
	count func() map[string]int // nil: nothing reported
}

func (c *warmCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *warmCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	pools, count := c.pools, c.count
	c.mu.Unlock()
	if count == nil {
		return
	}
	n := count()
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[poolKey(p[0], p[1])]), p[0], p[1])
	}
}

// countWarm makes count the source of the cordon_pool_warm gauge.
func (m *metrics) countWarm(count func() map[string]int) {
	m.tenant.warm.mu.Lock()
	defer m.tenant.warm.mu.Unlock()
	m.tenant.warm.count = count
}

// exec counts one exec of tenant that took d: its outcome, and the connections its
// result says the egress proxy refused. res is nil when cordon could not run it;
// canceled says the client went away.
func (m *metrics) exec(tenant string, res *wire.Result, canceled bool, d time.Duration) {
	tm := m.tenant
	if !tm.tenants[tenant] {
		return
	}
	outcome := outcomeError
	switch {
	case canceled:
		outcome = outcomeCanceled
	case res == nil:
	case res.TimedOut:
		outcome = outcomeTimeout
	case res.Reason == event.ReasonMonitor:
		outcome = outcomeMonitor
	case res.ExitCode == 0:
		outcome = outcomeOK
	default:
		outcome = outcomeFailed
	}
	tm.execs.WithLabelValues(tenant, outcome).Inc()
	tm.execTime.WithLabelValues(tenant).Observe(d.Seconds())
	if res != nil {
		if n := len(res.DeniedEgress) + max(res.DeniedMore, 0); n > 0 {
			tm.denials.WithLabelValues(tenant).Add(float64(n))
		}
	}
}

// declarePool makes pool of tenant one the metrics count claims of (at zero until the
// first): labels only ever come from the config.
func (m *metrics) declarePool(tenant, pool string) {
	m.tenant.pools[poolKey(tenant, pool)] = true
	m.tenant.warm.mu.Lock()
	m.tenant.warm.pools = append(m.tenant.warm.pools, [2]string{tenant, pool})
	m.tenant.warm.mu.Unlock()
	m.tenant.pool.WithLabelValues(tenant, pool, resultHit)
	m.tenant.pool.WithLabelValues(tenant, pool, resultMiss)
}

// poolClaim counts a start of tenant that could take a warm session of pool: hit when
// it did.
func (m *metrics) poolClaim(tenant, pool string, hit bool) {
	if m.tenant.pools[poolKey(tenant, pool)] {
		r := resultMiss
		if hit {
			r = resultHit
		}
		m.tenant.pool.WithLabelValues(tenant, pool, r).Inc()
	}
}

// refused counts a request of tenant refused (429) past quota q.
func (m *metrics) refused(tenant, q string) {
	if !m.tenant.tenants[tenant] {
		return
	}
	if !slices.Contains(quotaNames, q) {
		q = quotaOther
	}
	m.tenant.refusals.WithLabelValues(tenant, q).Inc()
}

// seal counts a dead session of tenant collected: sealed says its log is sealed now.
func (m *metrics) seal(tenant string, sealed bool) {
	if m.tenant.tenants[tenant] {
		r := resultFailed
		if sealed {
			r = resultSealed
		}
		m.tenant.seals.WithLabelValues(tenant, r).Inc()
	}
}
