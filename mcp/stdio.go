package mcp

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxPending bounds the requests a [Stdio] connection has read and not answered yet.
// An agent has a few tool calls running (at most Options.MaxCalls) and a few quick
// requests in flight; one that sends more without reading the answers waits.
const MaxPending = 64

// errBatch ends a connection whose client sent a JSON-RPC batch.
var errBatch = errors.New("a JSON-RPC batch is not served: send one message a line (MCP has no batches since 2025-06-18)")

// Stdio is the transport `cordon mcp` serves on: the SDK's stdio transport (one
// message a line on r and w) with two bounds a hostile client needs. The SDK reads
// every request as it comes and queues it, and its answers wait on w: a client that
// writes requests and never reads the answers had cordon hold each one and its
// answer, 1.3 GiB in 20s of tools/list lines (TestRT7MCPPipelinedUnread).
// Stdio reads no further request while [MaxPending] wait for their answers, so such
// a client's writes block instead. And a batch (a line that is a JSON array),
// which the SDK would parse and queue whole for a client of protocol 2025-03-26,
// ends the connection.
//
// Both bounds hold only for a server that answers each request without waiting on
// the client, as this package's does: it sends the client no request.
func Stdio(r io.Reader, w io.WriteCloser) gomcp.Transport {
	return &bounded{t: &gomcp.IOTransport{Reader: io.NopCloser(&noBatch{r: r}), Writer: w}, n: MaxPending}
}

// bounded is a transport whose connections read no request past n unanswered.
type bounded struct {
	t gomcp.Transport
	n int
}

func (b *bounded) Connect(ctx context.Context) (gomcp.Connection, error) {
	c, err := b.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &boundedConn{Connection: c, n: b.n, answered: make(chan struct{}, 1), closed: make(chan struct{}), pending: map[jsonrpc.ID]struct{}{}}, nil
}

// boundedConn is a connection that reads no request while n are unanswered. Read
// is called by one goroutine at a time, Write and Close by any.
type boundedConn struct {
	gomcp.Connection
	n        int
	answered chan struct{} // a token when an answer was written
	closed   chan struct{}
	once     sync.Once
	// mu guards pending: the ids of the requests read and not answered.
	mu      sync.Mutex
	pending map[jsonrpc.ID]struct{}
}

func (c *boundedConn) full() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) >= c.n
}

func (c *boundedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for c.full() {
		select {
		case <-c.answered:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		}
	}
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.IsCall() {
		c.mu.Lock()
		c.pending[req.ID] = struct{}{}
		c.mu.Unlock()
	}
	return msg, err
}

func (c *boundedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		_, was := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if was {
			select {
			case c.answered <- struct{}{}:
			default:
			}
		}
	}
	return err
}

func (c *boundedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// noBatch is r, which fails with errBatch where a JSON value at the top level, one
// message, would start with '[': a batch. It follows JSON's nesting and strings, not
// lines, as the SDK's decoder does (which takes `{}\r[...]` as two values). Past
// a byte that is not JSON the decoder fails first, ending the connection.
type noBatch struct {
	r        io.Reader
	depth    int  // of the objects and arrays open
	inString bool // in a string, escaped after a backslash
	escaped  bool
	err      error
}

func (b *noBatch) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	for i, c := range p[:n] {
		switch {
		case b.escaped:
			b.escaped = false
		case b.inString:
			b.escaped = c == '\\'
			b.inString = c != '"'
		case c == '"':
			b.inString = true
		case c == '[' && b.depth == 0:
			// What came before it is whole messages: served; the batch is not.
			b.err = errBatch
			return i, nil
		case c == '{' || c == '[':
			b.depth++
		case (c == '}' || c == ']') && b.depth > 0:
			b.depth--
		}
	}
	return n, err
}
