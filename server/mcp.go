package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/mcp"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/session"
)

// MCP over the streamable HTTP transport (api.MCP): each MCP session is one session
// of the caller's tenant, started as POST /v1/sessions starts one (the tenant's base
// contract, its quotas, its warm pool) when the client initializes, and stopped, its
// log sealed, when the MCP session ends: the client's DELETE, the tenant's
// quotas.mcp_idle without a request, the session ending on its own (its wall time, a stop through the API),
// or the daemon stopping. The MCP session id is not a credential: every request
// naming one is checked against the caller's tenant, and another tenant's is 404 as
// a missing one.
const (
	// mcpMaxBody bounds one message: a write_file of mcp's 8 MiB, JSON-escaped.
	mcpMaxBody = 24 << 20
	// mcpMaxInit bounds the initialize request that starts a session.
	mcpMaxInit = 64 << 10
	// mcpWatch is how often an MCP session's cordon session is checked for having
	// ended on its own.
	mcpWatch = 2 * time.Second
	// mcpSessionHeader is the transport's session header.
	mcpSessionHeader = "Mcp-Session-Id"
)

// mcpHub is the server's MCP sessions and the SDK's handler that serves them.
type mcpHub struct {
	s *Server
	// h serves each tenant's MCP sessions: the SDK's handler. Its own idle timeout
	// is not set: it closes a session only once the calls in flight return, which a
	// call whose client went away need not do for as long as its command may run;
	// watch ends an idle session (mcpConn.idle), its calls first.
	h       map[string]*gomcp.StreamableHTTPHandler
	mu      sync.Mutex
	byID    map[string]*mcpConn // by MCP session id
	closing bool                // the daemon is stopping: no session opens
	wg      sync.WaitGroup      // the watchers: each stops its session when it ends
	bodies  bodyBudget          // the bytes of the POSTs in flight
}

// mcpConn is one MCP session: its tenant, its cordon session and its MCP server.
type mcpConn struct {
	id      string // the MCP session id
	tenant  string
	session string // the cordon session's id
	srv     *gomcp.Server
	// timeout is the session's command timeout: the longest a tool call holds its
	// request.
	timeout time.Duration
	ss      *gomcp.ServerSession // once the SDK connected it; guarded by mcpHub.mu
	ended   chan struct{}        // closed once the cordon session is stopped
	// calls is every tool call's context: cancelled as the MCP session ends (its
	// client's DELETE, mcp_idle, the daemon stopping), it ends the calls in flight,
	// their commands stopped, so that the SDK, which closes a session only once its
	// calls return, does not wait on a command no client will hear of.
	calls  context.Context
	cancel context.CancelFunc
	// idle is the tenant's quotas.mcp_idle: how long the session may go without a
	// POST in progress.
	idle time.Duration
	// posts are the POSTs in progress, by their mcpPostHeader, and last when the
	// latest ended; guarded by mcpHub.mu.
	posts map[string]context.Context
	last  time.Time
}

// mcpConnKey is where a request's context carries its mcpConn for the SDK's getServer.
type mcpConnKey struct{}

func newMCPHub(s *Server) *mcpHub {
	hub := &mcpHub{s: s, byID: map[string]*mcpConn{}, h: map[string]*gomcp.StreamableHTTPHandler{}}
	getServer := func(r *http.Request) *gomcp.Server {
		if c, ok := r.Context().Value(mcpConnKey{}).(*mcpConn); ok {
			return c.srv
		}
		return nil
	}
	for _, t := range s.cfg.Tenants {
		hub.h[t.Name] = gomcp.NewStreamableHTTPHandler(getServer,
			&gomcp.StreamableHTTPOptions{MaxRequestBodyBytes: mcpMaxBody})
	}
	return hub
}

func (s *Server) mcpHandlers() map[string]handler {
	return map[string]handler{
		"POST " + api.MCP:   s.mcp.post,
		"GET " + api.MCP:    s.mcp.get,
		"DELETE " + api.MCP: s.mcp.del,
	}
}

// lookup is the caller's MCP session named by the request's header, or nil when it
// names none of the caller's tenant.
func (hub *mcpHub) lookup(r *http.Request, id auth.Identity) *mcpConn {
	sid := r.Header.Get(mcpSessionHeader)
	hub.mu.Lock()
	defer hub.mu.Unlock()
	c := hub.byID[sid]
	if c == nil || c.tenant != id.Tenant {
		return nil
	}
	return c
}

// named answers a request that must name a session of the caller's: 400 without the
// header, 404 for one that is not the caller's tenant's (or does not exist).
func (hub *mcpHub) named(w http.ResponseWriter, r *http.Request, id auth.Identity) *mcpConn {
	if len(r.Header.Values(mcpSessionHeader)) != 1 {
		writeError(w, http.StatusBadRequest, "want one "+mcpSessionHeader+" header")
		return nil
	}
	c := hub.lookup(r, id)
	if c == nil {
		writeError(w, http.StatusNotFound, "no such MCP session")
	}
	return c
}

func (hub *mcpHub) post(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != api.JSON {
		writeError(w, http.StatusUnsupportedMediaType, "want Content-Type: application/json")
		return
	}
	if r.ContentLength > mcpMaxBody {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	if len(r.Header.Values(mcpSessionHeader)) == 0 {
		hub.open(w, r, id)
		return
	}
	c := hub.named(w, r, id)
	if c == nil || !oneMessage(w, r) {
		return
	}
	if release := hub.budget(w, r, id.Tenant); release != nil {
		defer release()
		hub.serve(w, r, c, hub.callTime(c))
	}
}

// oneMessage refuses a body that is a JSON-RPC batch (an array), which the SDK
// would serve for a client of protocol version 2025-03-26 or none: each call of
// it a handler of its own, past any bound (mcp's MaxCalls refuses only tool
// calls), a goroutine each while their answers wait behind an unread stream.
// MCP dropped batches in 2025-06-18; a client sends one message a POST. It
// answers 400 for a batch, and otherwise leaves r's body as it was to be read.
func oneMessage(w http.ResponseWriter, r *http.Request) bool {
	br := bufio.NewReader(http.MaxBytesReader(w, r.Body, mcpMaxBody))
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	for {
		b, err := br.ReadByte()
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return false
		case err != nil: // empty or cut short: the SDK answers it
			return true
		case b == ' ' || b == '\t' || b == '\r' || b == '\n':
			continue
		case b == '[':
			writeError(w, http.StatusBadRequest, "a JSON-RPC batch is not served: send one message a POST (MCP has no batches since 2025-06-18)")
			return false
		}
		_ = br.UnreadByte()
		return true
	}
}

// get serves the session's standalone event stream. It lasts as long as its session
// or its client: it is not cut at the command timeout as a POST is, since the SDK's
// client, which gets no event id to resume from (no event store), counts each cut
// as a retry without progress and, past its retries (5), fails the whole session:
// a Go SDK client lost its served session after 12 minutes of use (rt8). The server
// writes nothing on it but its prime (no notification goes there), so a client that
// never reads it holds no write; it ends with the session (DELETE, mcp_idle, the
// daemon stopping) and, like every held request, counts against the tenant's bound.
func (hub *mcpHub) get(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if c := hub.named(w, r, id); c != nil {
		hub.serve(w, r, c, 0)
	}
}

// del ends the session and answers once its cordon session is stopped and its log
// sealed (or stopTimeout passed).
func (hub *mcpHub) del(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	c := hub.named(w, r, id)
	if c == nil {
		return
	}
	if _, ok := extendDeadlines(w, stopTimeout+execMargin); !ok {
		return
	}
	c.cancel()
	jw := &jsonErrors{ResponseWriter: w}
	hub.h[c.tenant].ServeHTTP(jw, withConn(r, c))
	if jw.rewrite {
		jw.finish()
		return
	}
	select {
	case <-c.ended:
	case <-time.After(stopTimeout):
	}
}

// serve hands a request of session c to the SDK, its connection's deadlines lifted
// for d (for good when 0; see get).
func (hub *mcpHub) serve(w http.ResponseWriter, r *http.Request, c *mcpConn, d time.Duration) {
	if _, ok := extendDeadlines(w, d); !ok {
		return
	}
	r.Header.Del(mcpPostHeader)
	if r.Method == http.MethodPost {
		defer hub.postStarts(r, c)()
	}
	jw := &jsonErrors{ResponseWriter: w}
	hub.h[c.tenant].ServeHTTP(jw, withConn(r, c))
	jw.finish()
}

// idleFor is how long c has gone without a POST in progress (0 while one is).
func (hub *mcpHub) idleFor(c *mcpConn) time.Duration {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if len(c.posts) > 0 {
		return 0
	}
	return time.Since(c.last)
}

// callTime is how long a request of c may take: its longest call, then streamMargin
// for the teardown and the answer, as an exec's.
func (hub *mcpHub) callTime(c *mcpConn) time.Duration { return c.timeout + hub.s.streamMargin() }

func withConn(r *http.Request, c *mcpConn) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), mcpConnKey{}, c))
}

// open starts a session for an initialize request with no session id, and serves the
// initialize on it. A start refused (a quota, a bad query) is answered as POST
// /v1/sessions answers it.
func (hub *mcpHub) open(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpMaxInit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "an initialize request is at most "+strconv.Itoa(mcpMaxInit)+" bytes")
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading the request: "+err.Error())
		return
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != "initialize" {
		writeError(w, http.StatusBadRequest, "a request without "+mcpSessionHeader+" must be one initialize request: it starts a session")
		return
	}
	start, err := mcpStartRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	roots, ok := hub.s.roots(w, id)
	if !ok {
		return
	}
	as, ok := hub.s.startFor(w, r, id, start)
	if !ok {
		return
	}
	c, err := hub.connect(roots, as)
	if err != nil {
		hub.s.log.Error("mcp: opening the session", logTenant, id.Tenant, logSession, as.ID, logErr, err)
		hub.stopSession(roots, as.ID)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	c.tenant, c.idle = id.Tenant, roots.t.Quotas.MCPIdle
	hub.mu.Lock()
	if hub.closing {
		hub.mu.Unlock()
		hub.stopSession(roots, as.ID)
		writeError(w, http.StatusServiceUnavailable, "the server is stopping")
		return
	}
	hub.byID[c.id] = c
	hub.wg.Add(1) // before closeAll can wait: closing is not set yet
	hub.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	hub.serve(w, r, c, hub.callTime(c))
	hub.mu.Lock()
	for ss := range c.srv.Sessions() {
		c.ss = ss
		if hub.closing { // closeSessions ran before the SDK had it
			_ = ss.Close()
		}
	}
	started := c.ss != nil
	hub.mu.Unlock()
	if started {
		hub.s.log.Info("mcp session started", logTenant, id.Tenant, logSession, c.session, logCredential, id.Credential)
	}
	go hub.watch(roots, c) // with no MCP session (its initialize refused), it stops the session now
}

// mcpStartRequest is the start an initialize asks for: its query's workspace, pool,
// backend and stage, each at most once; nothing else.
func mcpStartRequest(r *http.Request) (api.StartRequest, error) {
	var req api.StartRequest
	for k, vs := range r.URL.Query() {
		if len(vs) != 1 {
			return req, errors.New("query: " + k + " is given more than once")
		}
		switch v := vs[0]; k {
		case "workspace":
			req.Workspace = v
		case "pool":
			req.Pool = v
		case "backend":
			req.Backend = v
		case "stage":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return req, errors.New("query: stage: want true or false")
			}
			req.Stage = b
		default:
			return req, errors.New("query: unknown parameter " + strconv.Quote(k) + " (workspace, pool, backend and stage are known)")
		}
	}
	return req, nil
}

// startFor starts a session of the caller's as POST /v1/sessions does (startSession,
// its admission, quotas and warm pool), and returns it; on a refusal it has answered
// with startSession's answer.
func (s *Server) startFor(w http.ResponseWriter, r *http.Request, id auth.Identity, req api.StartRequest) (api.Session, bool) {
	body, err := json.Marshal(req)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return api.Session{}, false
	}
	sr := r.Clone(r.Context())
	sr.Body, sr.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	sr.Header.Set("Content-Type", api.JSON)
	cw := &captured{w: w, header: http.Header{}}
	s.startSession(cw, sr, id)
	var as api.Session
	if cw.status == http.StatusCreated && json.Unmarshal(cw.body.Bytes(), &as) == nil && as.ID != "" {
		return as, true
	}
	for k, vs := range cw.header {
		w.Header()[k] = vs
	}
	if cw.status == 0 {
		cw.status = http.StatusInternalServerError
	}
	w.WriteHeader(cw.status)
	_, _ = w.Write(cw.body.Bytes())
	return api.Session{}, false
}

// connect makes the MCP server of the started session as.
func (hub *mcpHub) connect(roots tenantRoots, as api.Session) (*mcpConn, error) {
	rec, err := readRecord(roots, as.ID)
	if err != nil {
		return nil, err
	}
	sess, err := session.OpenWith(roots.env(), as.ID)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(rec.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = maxExecTimeout
	}
	c := &mcpConn{id: rand.Text(), session: as.ID, timeout: timeout, ended: make(chan struct{}), posts: map[string]context.Context{}, last: time.Now()}
	c.calls, c.cancel = context.WithCancel(context.Background())
	c.srv = mcp.New(sess, mcp.Options{Version: "serve", Stage: rec.Stage, Gates: sessionGates(rec), MaxTimeout: timeout, SessionID: c.id})
	c.srv.AddReceivingMiddleware(c.bound(hub))
	return c, nil
}

// sessionGates are the gates a person may approve of the contract session rec runs:
// the file the server wrote for it (the tenant's base contract, or its pool's). A
// served session's gates are asked of the tenant's approvers whatever the server's
// environment says (tenantRoots.env). None when the file cannot be read (no gate
// tool, rather than one that could only fail).
func sessionGates(rec sessionRecord) []mcp.Gate {
	if rec.Contract == "" { // served sessions ask (tenantRoots.env)
		return nil
	}
	c, err := contract.Load(rec.Contract)
	if err != nil {
		return nil
	}
	var gs []mcp.Gate
	for _, g := range c.Gates {
		if g.Approve.Value != contract.ApproveDeny {
			gs = append(gs, mcp.Gate{Name: g.Name.Value, Why: g.Why})
		}
	}
	return gs
}

// watch waits for c's MCP session to end (the client's DELETE, the daemon
// stopping), ending it when it was idle for c.idle or its cordon session ended on
// its own, then stops the cordon session and forgets c.
func (hub *mcpHub) watch(roots tenantRoots, c *mcpConn) {
	defer hub.wg.Done()
	hub.mu.Lock()
	ss := c.ss
	hub.mu.Unlock()
	if ss != nil {
		done := make(chan struct{})
		go func() { _ = ss.Wait(); close(done) }()
		tick := time.NewTicker(mcpWatch)
		ending := false
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-tick.C:
				if !ending && (hub.idleFor(c) >= c.idle || sessionOver(roots, c.session)) {
					ending = true
					c.cancel()
					go ss.Close() // once its calls returned, which they do now; done then
				}
			}
		}
		tick.Stop()
	}
	c.cancel()
	hub.mu.Lock()
	delete(hub.byID, c.id)
	hub.mu.Unlock()
	hub.stopSession(roots, c.session)
	close(c.ended)
	hub.s.log.Info("mcp session ended", logTenant, c.tenant, logSession, c.session)
}

// sessionOver says whether session id ended on its own (its wall time, a stop
// through the API) or cannot be read.
func sessionOver(roots tenantRoots, id string) bool {
	rec, err := readRecord(roots, id)
	return err != nil || rec.Stopped || state(roots, rec) != stateRunning
}

// stopSession stops session id, releasing its charge, as POST /v1/sessions/{id}/stop
// does.
func (hub *mcpHub) stopSession(roots tenantRoots, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout+execMargin)
	defer cancel()
	rec, err := readRecord(roots, id)
	if err == nil {
		err = hub.s.stop(ctx, roots, rec)
	}
	if err != nil {
		hub.s.log.Error("mcp: stopping the session", logTenant, roots.t.Name, logSession, id, logErr, err)
	}
}

// closeSessions ends every MCP session: the daemon is stopping, and no client can
// reach them again. Their watchers stop their sessions. It does not wait: it runs as
// the HTTP server's shutdown begins, so that the sessions' event streams end rather
// than hold the shutdown for its whole grace.
func (hub *mcpHub) closeSessions() {
	hub.mu.Lock()
	hub.closing = true
	var sss []*gomcp.ServerSession
	for _, c := range hub.byID {
		c.cancel()
		if c.ss != nil {
			sss = append(sss, c.ss)
		}
	}
	hub.mu.Unlock()
	for _, ss := range sss {
		go ss.Close() // each once its calls returned, which they do now
	}
}

// closeAll ends every MCP session and waits, within ctx, for their sessions to be
// stopped and their logs sealed.
func (hub *mcpHub) closeAll(ctx context.Context) {
	hub.closeSessions()
	done := make(chan struct{})
	go func() { hub.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
