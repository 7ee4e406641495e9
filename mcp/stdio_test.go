package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestNoBatch(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"messages", "{\"a\":1}\n{\"b\":[1,{\"c\":[]}]}\n", "{\"a\":1}\n{\"b\":[1,{\"c\":[]}]}\n"},
		{"a message over lines", "{\"x\":\n[1]}\n", "{\"x\":\n[1]}\n"},
		{"brackets in strings", "{\"s\":\"}]\\\"[\"}\n{}\n", "{\"s\":\"}]\\\"[\"}\n{}\n"},
		{"batch first", "[{}]\n", ""},
		{"batch after a message", "{}\n  \t[{}]\n{}\n", "{}\n  \t"},
		{"batch after CR", "{}\r[{}]\n", "{}\r"},
		{"batch on the same line", "{} [{}]\n", "{} "},
		{"batch after a string's end", "{\"s\":\"a\\\\\"}[{}]\n", "{\"s\":\"a\\\\\"}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := io.ReadAll(&noBatch{r: iotestOneByte(c.in)})
			wantErr := c.want != c.in
			if string(got) != c.want || errors.Is(err, errBatch) != wantErr {
				t.Errorf("got %q, %v; want %q (batch refused: %v)", got, err, c.want, wantErr)
			}
		})
	}
}

// iotestOneByte reads s one byte a Read, the worst split of lines.
func iotestOneByte(s string) io.Reader { return &oneByte{s: s} }

type oneByte struct{ s string }

func (o *oneByte) Read(p []byte) (int, error) {
	if o.s == "" {
		return 0, io.EOF
	}
	p[0], o.s = o.s[0], o.s[1:]
	return 1, nil
}

// fakeConn hands out calls with ids 1, 2, ... and records nothing written.
type fakeConn struct{ next int64 }

func (f *fakeConn) Read(context.Context) (jsonrpc.Message, error) {
	f.next++
	id, _ := jsonrpc.MakeID(float64(f.next))
	return &jsonrpc.Request{ID: id, Method: "ping"}, nil
}
func (f *fakeConn) Write(context.Context, jsonrpc.Message) error { return nil }
func (f *fakeConn) Close() error                                 { return nil }
func (f *fakeConn) SessionID() string                            { return "" }

func TestBoundedPending(t *testing.T) {
	c := &boundedConn{Connection: &fakeConn{}, n: 3, maxBytes: 1 << 20, answered: make(chan struct{}, 1), closed: make(chan struct{}), pending: map[jsonrpc.ID]int{}}
	ctx := context.Background()
	for range 3 {
		if _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Full: a fourth read waits, until cancelled.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Read(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a read past 3 unanswered: %v; want it to wait", err)
	}
	// An answer to an unknown id frees nothing; one to a pending id frees one.
	other, _ := jsonrpc.MakeID("other")
	_ = c.Write(ctx, &jsonrpc.Response{ID: other})
	if !c.full() {
		t.Fatal("an answer to no pending request freed a slot")
	}
	two, _ := jsonrpc.MakeID(float64(2))
	_ = c.Write(ctx, &jsonrpc.Response{ID: two})
	if m, err := c.Read(ctx); err != nil || m.(*jsonrpc.Request).ID.Raw() != int64(4) {
		t.Fatalf("after an answer: %v, %v", m, err)
	}
	// Closed: a waiting read ends.
	_ = c.Close()
	if _, err := c.Read(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("a read on a closed, full connection: %v", err)
	}
}

func TestBoundedPendingBytes(t *testing.T) {
	c := &boundedConn{Connection: &bigConn{}, n: 100, maxBytes: 25, answered: make(chan struct{}, 1), closed: make(chan struct{}), pending: map[jsonrpc.ID]int{}}
	ctx := context.Background()
	for range 3 { // 30 bytes: the third passes 25, then no more
		if _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Read(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a read past 25 bytes pending: %v; want it to wait", err)
	}
	one, _ := jsonrpc.MakeID(float64(1))
	_ = c.Write(ctx, &jsonrpc.Response{ID: one})
	if _, err := c.Read(ctx); err != nil {
		t.Fatalf("after an answer: %v", err)
	}
}

// bigConn hands out calls whose parameters are 10 bytes.
type bigConn struct{ fakeConn }

func (b *bigConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := b.fakeConn.Read(ctx)
	m.(*jsonrpc.Request).Params = []byte(`"12345678"`)
	return m, err
}

// TestBoundedDuplicateID runs a real SDK server on Stdio and sends a call whose id
// repeats one still running. The bound counts each id read once and frees it on the
// answer with that id: that is exact only because the SDK never answers the duplicate
// with its id (it drops it, or refuses it with a null id). Were the duplicate's
// refusal to carry the id, it would free the running call's slot and the bound would
// admit one more request per duplicate: this test pins the behaviour it relies on.
func TestBoundedDuplicateID(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s := gomcp.NewServer(&gomcp.Implementation{Name: "t", Version: "0"}, nil)
	gomcp.AddTool(s, &gomcp.Tool{Name: "block", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, _ *gomcp.CallToolRequest, _ any) (*gomcp.CallToolResult, any, error) {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &gomcp.CallToolResult{}, nil, nil
		})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var conn *boundedConn
	tr := &captured{Transport: Stdio(inR, outW), conn: &conn}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, tr) }()
	answers := json.NewDecoder(outR)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	answer := func() map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		if err := answers.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"0"}}}`)
	answer()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","arguments":{}}}`
	send(call)
	<-started
	send(call)
	// The SDK answers the duplicate with nothing, or with a refusal of a null id,
	// never with its id; a ping after it shows it was read and dealt with.
	send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	for {
		a := answer()
		if string(a["id"]) == "8" {
			break
		}
		if string(a["id"]) != "null" || a["error"] == nil {
			t.Fatalf("an answer before the ping's: id %s, result %s, error %s; want none or a refusal with a null id", a["id"], a["result"], a["error"])
		}
	}
	// The ping's entry goes once its answer is written, just after we read it.
	seven, _ := jsonrpc.MakeID(float64(7))
	eight, _ := jsonrpc.MakeID(float64(8))
	held := conn.held()
	for deadline := time.Now().Add(10 * time.Second); held[eight] && time.Now().Before(deadline); held = conn.held() {
		time.Sleep(time.Millisecond)
	}
	if len(held) != 1 || !held[seven] {
		t.Fatalf("pending after the duplicate: %v; want the running call 7 alone", held)
	}
	close(release)
	if first := answer(); string(first["id"]) != "7" {
		t.Fatalf("the first call's answer: %s", first["id"])
	}
	for deadline := time.Now().Add(10 * time.Second); len(held) > 0 && time.Now().Before(deadline); held = conn.held() {
		time.Sleep(time.Millisecond)
	}
	if len(held) > 0 {
		t.Fatalf("%v pending once every call was answered", held)
	}
	inW.Close()
	cancel()
	<-done
}

// held is the set of ids c counts as pending.
func (c *boundedConn) held() map[jsonrpc.ID]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := map[jsonrpc.ID]bool{}
	for id := range c.pending {
		ids[id] = true
	}
	return ids
}

// captured is a transport that keeps the bounded connection it makes.
type captured struct {
	gomcp.Transport
	conn **boundedConn
}

func (c *captured) Connect(ctx context.Context) (gomcp.Connection, error) {
	conn, err := c.Transport.Connect(ctx)
	if b, ok := conn.(*boundedConn); ok {
		*c.conn = b
	}
	return conn, err
}
