package mcp

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
