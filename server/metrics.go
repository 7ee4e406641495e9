package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// SessionCounter is what the sessions code gives /metrics: the open sessions of each
// tenant by name, read at every scrape. Only the config's tenants are reported.
type SessionCounter interface {
	Sessions() map[string]int
}

// Limits of the metrics listener: the operator's scraper, and nothing else, uses it.
const (
	metricsConns    = 16
	metricsInFlight = 4
	metricsTimeout  = 10 * time.Second
)

// routeNone labels a request no route of the table answered (404, 405, or refused
// before routing).
const routeNone = "none"

// metrics is what /metrics reports of a server. It is safe for concurrent use.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	conns    *connsCollector
	sessions *sessionsCollector
	tenant   *tenantMetrics // per tenant: execs, pool claims, quota refusals, egress denials, dead sessions
}

func newMetrics(tenants []string) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cordon_http_requests_total",
			Help: "API requests answered, by route pattern (\"none\": no route), method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cordon_http_request_duration_seconds",
			Help:    "Time to answer an API request (a stream: until it ends), by route pattern and method.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms to 262 s
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cordon_http_requests_in_flight",
			Help: "API requests being answered.",
		}),
		conns: &connsCollector{desc: prometheus.NewDesc("cordon_connections_open",
			"Open connections, by listener (unix, tcp, metrics).", []string{"listener"}, nil), by: map[string]*limitListener{}},
		sessions: &sessionsCollector{desc: prometheus.NewDesc("cordon_sessions",
			"Open sessions, by tenant.", []string{"tenant"}, nil), tenants: tenants},
		tenant: newTenantMetrics(tenants),
	}
	m.reg.MustRegister(m.requests, m.duration, m.inFlight, m.conns, m.sessions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.tenant.collectors()...)
	return m
}

// methods are the methods counted by name; any other is "other", so a client cannot
// make a label value per request.
var methods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// instrument counts and times the requests h answers, by the pattern of the route
// the mux matched (r.Pattern, which it sets on the request it is given): never by the
// raw path, which would make a series per id.
func (m *metrics) instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		start := time.Now()
		cw := &codeWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		route := r.Pattern
		if route == "" {
			route = routeNone
		}
		method := r.Method
		if !methods[method] {
			method = "other"
		}
		code := cw.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

// codeWriter records the status a handler answered with. Unwrap lets
// http.ResponseController reach the connection's (to flush a stream, to set its
// deadline).
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// listening adds l's open connections to the metrics, as listener name.
func (m *metrics) listening(name string, l *limitListener) {
	m.conns.mu.Lock()
	defer m.conns.mu.Unlock()
	m.conns.by[name] = l
}

// countSessions makes c the source of the sessions gauge (nil: none reported).
func (m *metrics) countSessions(c SessionCounter) { m.sessions.src.Store(&c) }

// connsCollector reports each listener's open connections when scraped.
type connsCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	by   map[string]*limitListener // mu guards it
}

func (c *connsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *connsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, l := range c.by {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(l.open()), name)
	}
}

// open is how many connections l holds (accepted and not yet closed).
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.peers {
		n += c
	}
	return n
}

// sessionsCollector reports a SessionCounter's counts, for the config's tenants only
// (0 for one it does not name), so a bug in the counter cannot make unbounded series.
type sessionsCollector struct {
	desc    *prometheus.Desc
	tenants []string
	src     atomic.Pointer[SessionCounter]
}

func (c *sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.src.Load()
	if p == nil || *p == nil {
		return
	}
	counts := (*p).Sessions()
	for _, t := range c.tenants {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[t]), t)
	}
}

// handler serves the metrics in Prometheus's text format: GET /metrics, nothing else.
func (m *metrics) handler(log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		MaxRequestsInFlight: metricsInFlight,
		Timeout:             metricsTimeout,
	}))
	return mux
}

// serveMetrics listens on listen.metrics, when set, and serves GET /metrics there
// until the returned stop is called. The listener is loopback only (the config
// refuses any other address) and unauthenticated: what it serves names every tenant,
// which is why no tenant's credential may read it on the API's listeners.
func (s *Server) serveMetrics() (stop func(context.Context), err error) {
	mc := s.cfg.Listen.Metrics
	if mc == nil {
		return func(context.Context) {}, nil
	}
	ln, err := net.Listen("tcp", mc.Address)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (listen.metrics): %w", mc.Address, err)
	}
	ll := newLimitListener(ln, metricsConns, metricsConns)
	s.metrics.listening("metrics", ll)
	hs := &http.Server{
		Handler:           s.metrics.handler(s.log),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.timeouts.Request,
		WriteTimeout:      s.timeouts.Response,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         connState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.log.Info("listening", logListener, "metrics", logAddr, ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(ll); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serving metrics", "error", err)
		}
	}()
	return func(ctx context.Context) {
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
		<-done
	}, nil
}
