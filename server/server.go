// Package server is `cordon serve`: one host serving many tenants' agents over HTTP,
// on a unix socket and on TCP with TLS. This is its front door: listening, the limits
// every hostile client meets, authentication, and the routes under /v1/: sessions
// (sessions*.go), workspaces, gates, runs and their logs, staged apply and discard;
// beside them each tenant's quotas (package [quota]), warm pools (pool.go) and disk
// (disks.go). docs/serve.md is the whole of it.
//
// Every request but GET /v1/health is authenticated (package [auth]); a bad or missing
// credential is 401 with the same body every time.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/server/quota"
)

// The limits every connection and request meets. A slow or idle client costs one of
// maxConns slots for at most these times and listen.timeouts' (the whole request,
// body included; the response, which streams lift); a body larger than maxBody is
// refused.
const (
	maxConns          = 1024             // per listener; past it a waiting connection is closed for a new one
	maxConnsPerPeer   = 128              // per remote IP (IPv6: /64) or local uid; closed at once past it
	readHeaderTimeout = 5 * time.Second  // the TLS handshake and the request head
	idleTimeout       = 60 * time.Second // between requests on a kept-alive connection
	maxHeaderBytes    = 16 << 10
	maxBody           = 1 << 20
	shutdownGrace     = 10 * time.Second
)

// Log field keys.
const (
	logMethod     = "method"
	logPath       = "path"
	logStatus     = "status"
	logTenant     = "tenant"
	logPool       = "pool"
	logCredential = "credential"
	logDuration   = "duration"
	logListener   = "listener"
	logAddr       = "addr"
	logSession    = "session"
	logWorkspace  = "workspace"
	logBackend    = "backend"
	logQuota      = "quota"
	logReason     = "reason"
	logAuditHead  = "audit_head" // the hash of a log's last line
	logErr        = "error"
)

// Server is a configured `cordon serve`. Make it with [New]; [Server.Serve] runs it.
type Server struct {
	cfg *config.Config
	// timeouts are cfg's listen.timeouts, defaults filled in.
	timeouts config.Timeouts
	// auth maps credentials to identities: swapped whole when the config's credentials
	// are reloaded ([Server.Reload]).
	auth atomic.Pointer[auth.Authenticator]
	tls  *tls.Config // nil without a TCP listener
	log  *slog.Logger
	// metrics is what /metrics reports (listen.metrics); counted whether served or not.
	metrics *metrics
	live    func(paths.Root, string) bool // whether a run may still append to its log; nil for runner.Live
	quota   *quota.Ledger                 // what each tenant's live sessions are charged
	pool    map[string]chan struct{}      // each pool's refill signal, by poolKey (pool.go)
	filling sync.WaitGroup                // the pools' refill loops (pool.go)
	sess    sessions                      // starts in flight (sessions.go)
	// heldReqs bounds each tenant's long requests: streams, starts, stops (held.go).
	heldReqs *heldLimiter
	// logDocs bounds the shows of a whole run's log at once (held.go).
	logDocs *heldLimiter

	// collectMu serialises the collections of dead sessions (sessions_dead.go).
	collectMu sync.Mutex
	gcCmd     func(context.Context, tenantRoots) // runs cordon gc; nil for the binary's (tests set it)
	wsMu      sync.Mutex                         // one workspace made at a time: its count and its make (workspaces.go)
	mcp       *mcpHub                            // the MCP sessions (mcp.go)
}

// New checks what cfg names on the host (the TLS certificate and key, the client CA)
// and returns a server ready to listen.
func New(cfg *config.Config, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, timeouts: cfg.Listen.Timeouts.WithDefaults(), log: log, metrics: newMetrics(tenantNames(cfg)),
		quota: quota.New(cfg), pool: refillChans(cfg), heldReqs: newHeldLimiter(), logDocs: newLogDocsLimiter()}
	if err := checkPoolQuotas(cfg); err != nil {
		return nil, err
	}
	s.auth.Store(auth.New(cfg))
	for _, t := range cfg.Tenants {
		for _, p := range t.Pools {
			s.metrics.declarePool(t.Name, p.Name)
		}
	}
	s.mcp = newMCPHub(s)
	s.metrics.countSessions(liveSessions{s})
	s.metrics.countWarm(s.readyWarmCounts)
	s.metrics.reg.MustRegister(newDiskCollector(cfg))
	if t := cfg.Listen.TCP; t != nil {
		var err error
		if s.tls, err = tlsConfig(t); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Reload takes next's credentials, at once, for every request from now on (a request
// already authenticated, a stream under way, finishes): how a token is revoked or a
// credential added without a restart. Anything else of next that differs from the
// config the server runs is refused, and nothing is taken: listeners, tenants, roots,
// quotas, pools and base contracts are what the running sessions were started and
// charged under, and change with a restart.
func (s *Server) Reload(next *config.Config) error {
	if what := s.cfg.ChangedBesidesCredentials(next); what != "" {
		return fmt.Errorf("reloading %s: %s changed, and only credentials are taken without a restart; nothing was taken", next.File, what)
	}
	s.auth.Store(auth.New(next))
	n := 0
	for _, t := range next.Tenants {
		n += len(t.Credentials)
	}
	s.log.Info("credentials reloaded", "file", next.File, "credentials", n)
	return nil
}

// Serve listens where the config says and serves until ctx ends, then stops
// gracefully: no new connection is accepted, requests in flight get [shutdownGrace]
// to finish, every connection is closed and the unix socket removed.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.mountDisks(ctx); err != nil {
		return err
	}
	defer s.unmountDisks() // those no session uses any more
	lns, err := s.listen()
	if err != nil {
		return err
	}
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	stopMetrics, err := s.serveMetrics()
	if err != nil {
		closeAll()
		return err
	}
	hs := &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.timeouts.Request,
		WriteTimeout:      s.timeouts.Response,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       connContext,
		ConnState:         connState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	hs.RegisterOnShutdown(s.mcp.closeSessions)
	s.adoptSessions(ctx)
	rctx, stopReaper := context.WithCancel(ctx)
	defer stopReaper()
	go s.reap(rctx)
	s.startPools(rctx)
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- hs.Serve(ln) }()
	}
	s.log.Info("serving", "tenants", len(s.cfg.Tenants))
	select {
	case <-ctx.Done():
	case err = <-errc: // a listener failed: stop the others too
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		hs.Close()
	}
	closeAll()
	// The MCP sessions' clients cannot reach them again: stopped, their logs sealed.
	s.mcp.closeAll(sctx)
	stopReaper()     // no refill of a pool from here on
	s.filling.Wait() // and the one under way, if any, has its session recorded
	s.stopWarm(sctx)
	stopMetrics(sctx)
	s.log.Info("stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// listen opens the listeners the config names (a unix socket, TCP with TLS), each
// bounded by a limitListener; on an error none stays open.
func (s *Server) listen() ([]net.Listener, error) {
	var lns []net.Listener
	if u := s.cfg.Listen.Unix; u != nil {
		ln, err := listenUnix(u)
		if err != nil {
			return nil, err
		}
		ll := newLimitListener(ln, maxConns, maxConnsPerPeer)
		s.metrics.listening("unix", ll)
		lns = append(lns, ll)
		s.log.Info("listening", logListener, "unix", logAddr, u.Path)
	}
	if t := s.cfg.Listen.TCP; t != nil {
		ln, err := net.Listen("tcp", t.Address)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("listening on %s: %w", t.Address, err)
		}
		ll := newLimitListener(ln, maxConns, maxConnsPerPeer)
		s.metrics.listening("tcp", ll)
		lns = append(lns, tls.NewListener(ll, s.tls))
		s.log.Info("listening", logListener, "tcp", logAddr, ln.Addr().String())
	}
	return lns, nil
}

// connState tells a connection's listener whether it waits for a request (new, or
// idle between requests), and may then be closed to admit another when the listener
// is full, or serves one.
func connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitConn); ok {
		lc.l.setWaiting(lc, st == http.StateNew || st == http.StateIdle)
	}
}

// peerKey is the context key of a unix connection's peer uid.
type peerKey struct{}

func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitConn); ok && lc.uid >= 0 {
		return context.WithValue(ctx, peerKey{}, lc.uid)
	}
	return ctx
}

func peerUID(ctx context.Context) (int, bool) {
	uid, ok := ctx.Value(peerKey{}).(int)
	return uid, ok
}

func tenantNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		names[i] = t.Name
	}
	return names
}
