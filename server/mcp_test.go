package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/server/api"
)

func TestMCPStartRequest(t *testing.T) {
	for q, want := range map[string]string{
		"":                                       "",
		"?workspace=w1&backend=bwrap&stage=true": "",
		"?pool=small":                            "",
		"?stage=1":                               "",
		"?stage=maybe":                           "stage",
		"?stage=true&stage=false":                "more than once",
		"?contract=x":                            "unknown parameter",
	} {
		r := httptest.NewRequest("POST", api.MCP+q, nil)
		req, err := mcpStartRequest(r)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", q, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v; want an error saying %q", q, err, want)
		case q == "?workspace=w1&backend=bwrap&stage=true" && (req.Workspace != "w1" || req.Backend != "bwrap" || !req.Stage):
			t.Errorf("%q: %+v", q, req)
		}
	}
}

// TestJSONErrors: the SDK's plain-text errors become the API's JSON ones; anything
// else passes through.
func TestJSONErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	jw := &jsonErrors{ResponseWriter: rec}
	http.Error(jw, "session not found", http.StatusNotFound)
	jw.finish()
	if rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != "application/json" || strings.TrimSpace(rec.Body.String()) != `{"error":"session not found"}` {
		t.Errorf("plain error: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = httptest.NewRecorder()
	jw = &jsonErrors{ResponseWriter: rec}
	jw.Header().Set("Content-Type", "text/event-stream")
	jw.WriteHeader(http.StatusOK)
	_, _ = jw.Write([]byte("data: x\n\n"))
	jw.finish()
	if rec.Code != http.StatusOK || rec.Body.String() != "data: x\n\n" {
		t.Errorf("a stream was changed: %d %q", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	jw = &jsonErrors{ResponseWriter: rec}
	http.Error(jw, strings.Repeat("x", 10*maxErrorText), http.StatusBadRequest)
	jw.finish()
	if rec.Body.Len() > 2*maxErrorText {
		t.Errorf("a long error was kept whole: %d bytes", rec.Body.Len())
	}
}

// TestOneMessage: a batch is 400, whitespace before it or not; one message, or a body
// the SDK must judge (empty, not JSON), is left whole to be read.
func TestOneMessage(t *testing.T) {
	for body, want := range map[string]int{
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`: http.StatusBadRequest,
		" \r\n\t[]": http.StatusBadRequest,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`:          0,
		"  \n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`: 0,
		"":     0,
		"  ":   0,
		"nope": 0,
	} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", api.MCP, strings.NewReader(body))
		ok := oneMessage(rec, r)
		if want != 0 {
			if ok || rec.Code != want {
				t.Errorf("%q: %v %d; want %d", body, ok, rec.Code, want)
			}
			continue
		}
		rest, _ := io.ReadAll(r.Body)
		if !ok || strings.TrimSpace(string(rest)) != strings.TrimSpace(body) {
			t.Errorf("%q: %v, body left %q", body, ok, rest)
		}
	}
}

// TestBodyBudget: a tenant's MCP bodies in flight stop at mcpBodiesPerTenant, every
// tenant's at mcpBodies but for each tenant's fair share; a release gives the bytes
// back, once.
func TestBodyBudget(t *testing.T) {
	var b bodyBudget
	r1, q := b.acquire("acme", mcpBodiesPerTenant-10)
	if r1 == nil || q != "" {
		t.Fatalf("first: %q", q)
	}
	if r, q := b.acquire("acme", 11); r != nil || q != mcpBodiesQuota {
		t.Fatalf("past the tenant's bound: %q", q)
	}
	r1()
	r1()
	if b.total != 0 || len(b.per) != 0 {
		t.Fatalf("after the release: %d %v", b.total, b.per)
	}
	var rs []func()
	for i := range mcpBodies / mcpBodiesPerTenant {
		r, q := b.acquire(fmt.Sprint("t", i), mcpBodiesPerTenant)
		if r == nil {
			t.Fatalf("tenant %d: %q", i, q)
		}
		rs = append(rs, r)
	}
	// Past the server's bound, a tenant still gets its fair share, and no more.
	fair, q := b.acquire("another", mcpFairShare-1)
	if fair == nil {
		t.Fatalf("a tenant's fair share past the server's bound: %q", q)
	}
	if r, q := b.acquire("another", 1); r == nil {
		t.Fatalf("the last byte of a tenant's fair share: %q", q)
	} else {
		rs = append(rs, r)
	}
	if r, q := b.acquire("another", 1); r != nil || q != serverMCPBodiesQuota {
		t.Fatalf("past the server's bound and the fair share: %q", q)
	}
	fair()
	for _, r := range rs {
		r()
	}
	if b.total != 0 {
		t.Fatalf("total after every release: %d", b.total)
	}
}

// TestChargeAnswer: a tool call's answer is charged to its tenant's budget until its
// POST ends; past the budget it is withheld, a tool error naming the quota.
func TestChargeAnswer(t *testing.T) {
	hub := &mcpHub{s: &Server{metrics: newMetrics([]string{"acme"})}}
	answer := func(n int) gomcp.Result {
		return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: strings.Repeat("x", n)}}}
	}
	post, end := context.WithCancel(context.Background())
	if res := hub.chargeAnswer("acme", post, answer(mcpBodiesPerTenant/2)); res.(*gomcp.CallToolResult).IsError {
		t.Fatal("the first answer, within the budget, was withheld")
	}
	if hub.bodies.per["acme"] <= mcpBodiesPerTenant/2 {
		t.Fatalf("charged %d for an answer of half the budget", hub.bodies.per["acme"])
	}
	res := hub.chargeAnswer("acme", context.Background(), answer(mcpBodiesPerTenant/2))
	if cr := res.(*gomcp.CallToolResult); !cr.IsError || !strings.Contains(cr.Content[0].(*gomcp.TextContent).Text, mcpBodiesQuota) {
		t.Fatalf("an answer past the budget: %+v; want a tool error naming %s", cr, mcpBodiesQuota)
	}
	end()
	// AfterFunc gives the charge back in a goroutine of its own.
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		hub.bodies.mu.Lock()
		total := hub.bodies.total
		hub.bodies.mu.Unlock()
		if total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still charged once the POST ended", total)
		}
	}
}
