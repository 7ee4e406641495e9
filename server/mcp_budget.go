package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/server/api"
)

// Bounds of the MCP messages in flight. A message is held, decoded several times
// over (the body, its JSON-RPC request, the tool's arguments and input), for as long
// as its POST lasts, which a tool call does not outlive (mcpConn.bound): 32 calls of
// an exec's 8 MiB stdin took the daemon from 33 MiB to 1.7 GiB. Each tenant may have
// mcpBodiesPerTenant bytes of POST bodies in flight, every tenant together
// mcpBodies; past either, a POST is 429 at once, the quota named. A body of unknown
// length counts as mcpMaxBody.
const (
	mcpBodiesPerTenant   = 64 << 20
	mcpBodies            = 256 << 20
	mcpFairShare         = mcpMaxBody          // what a tenant may hold whatever the others do
	mcpBodiesQuota       = "mcp_bodies"        // api.Error.Quota past mcpBodiesPerTenant
	serverMCPBodiesQuota = "server_mcp_bodies" // past mcpBodies
	// mcpPostHeader names, on a POST handed to the SDK, the POST a call arrived
	// on: the SDK gives a handler the request's header, not its context. A
	// client's own is replaced.
	mcpPostHeader = "Cordon-Mcp-Post"
)

// bodyBudget is the bytes of MCP bodies in flight, by tenant and in all.
type bodyBudget struct {
	mu    sync.Mutex
	per   map[string]int64
	total int64
}

// acquire takes n bytes of tenant's budget; the quota it is past when it cannot. A
// tenant holding less than mcpFairShare is never refused for the total, so that no
// set of other tenants can lock it out of MCP (rt8: four tenants declaring 64 MiB
// bodies each and sending one byte held the whole server's budget, and a fifth could
// not even initialize); the total is then at most mcpBodies and, for each tenant,
// mcpFairShare and one message.
func (b *bodyBudget) acquire(tenant string, n int64) (release func(), quota string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.per[tenant]+n > mcpBodiesPerTenant:
		return nil, mcpBodiesQuota
	case b.total+n > mcpBodies && b.per[tenant] >= mcpFairShare:
		return nil, serverMCPBodiesQuota
	}
	if b.per == nil {
		b.per = map[string]int64{}
	}
	b.per[tenant] += n
	b.total += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.per[tenant] -= n; b.per[tenant] == 0 {
				delete(b.per, tenant)
			}
			b.total -= n
		})
	}, ""
}

// budget takes r's body from tenant's budget, or answers 429 and returns nil.
func (hub *mcpHub) budget(w http.ResponseWriter, r *http.Request, tenant string) func() {
	n := r.ContentLength
	if n < 0 || n > mcpMaxBody {
		n = mcpMaxBody
	}
	release, quota := hub.bodies.acquire(tenant, n)
	if release == nil {
		hub.s.metrics.refused(tenant, quota)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, api.Error{Quota: quota,
			Error: fmt.Sprintf("%s: at most %d MiB of MCP messages in flight at a time", quota, budgetLimit(quota)>>20)})
	}
	return release
}

// postStarts records r, a POST of c's, for the calls it carries, and returns what
// forgets it once it ended.
func (hub *mcpHub) postStarts(r *http.Request, c *mcpConn) (ended func()) {
	key := rand.Text()
	r.Header.Set(mcpPostHeader, key)
	hub.mu.Lock()
	c.posts[key] = r.Context()
	hub.mu.Unlock()
	return func() {
		hub.mu.Lock()
		delete(c.posts, key)
		c.last = time.Now()
		hub.mu.Unlock()
	}
}

// bound ends each request the MCP server handles when c's calls are cancelled (the
// MCP session is ending), and a tool call also when the POST it came on ends: its
// answer has no one to go to (no stream is resumed), and its arguments are not
// held past the POST's charge to the budget. A client that goes away mid-call
// ends its command, as an exec stream's does.
func (c *mcpConn) bound(hub *mcpHub) gomcp.Middleware {
	return func(next gomcp.MethodHandler) gomcp.MethodHandler {
		return func(ctx context.Context, method string, req gomcp.Request) (gomcp.Result, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(c.calls, cancel)()
			if method == "tools/call" {
				post, ok := context.Context(nil), false
				if x := req.GetExtra(); x != nil {
					hub.mu.Lock()
					post, ok = c.posts[x.Header.Get(mcpPostHeader)]
					hub.mu.Unlock()
				}
				if !ok { // its POST ended already
					return nil, context.Canceled
				}
				defer context.AfterFunc(post, cancel)()
				res, err := next(ctx, method, req)
				if err != nil {
					return res, err
				}
				return hub.chargeAnswer(c.tenant, post, res), nil
			}
			return next(ctx, method, req)
		}
	}
}

// chargeAnswer takes a tool call's answer from tenant's budget until post, the POST
// that carries it, ends: an answer is held, encoded, for as long as its client does
// not read it, as a body is while its call runs. A client that posted 32 calls of an
// exec of 400 KB of control characters (a few hundred bytes of bodies) and never read
// held 875 MiB of the daemon (rt8). Past the budget, the answer is withheld and the
// call's result is a tool error saying so: the call ran (an exec's whole output stays
// in its spill file), but the client, which has that much unread, is not sent more.
func (hub *mcpHub) chargeAnswer(tenant string, post context.Context, res gomcp.Result) gomcp.Result {
	data, err := json.Marshal(res)
	if err != nil {
		return res // the SDK will fail to encode it too, and say so
	}
	release, quota := hub.bodies.acquire(tenant, int64(len(data)))
	if release == nil {
		hub.s.metrics.refused(tenant, quota)
		return &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: fmt.Sprintf(
			"the call ran, but its answer (%d bytes) is withheld: %s: at most %d MiB of MCP messages in flight at a time, "+
				"and this client has that much unread; an exec's whole output is in its spill file until the next changes call",
			len(data), quota, budgetLimit(quota)>>20)}}}
	}
	context.AfterFunc(post, release)
	return res
}

// budgetLimit is the bound of a budget's quota.
func budgetLimit(quota string) int {
	if quota == serverMCPBodiesQuota {
		return mcpBodies
	}
	return mcpBodiesPerTenant
}
