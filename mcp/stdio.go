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

// MaxPendingBytes bounds the parameters of the requests a [Stdio] connection has
// read and not answered, which it holds until their answers are written: a request
// may be up to a 16 MiB line (the SDK's bound), so MaxPending of them could be
// gigabytes held for a client that does not read. Past it, as past MaxPending, no
// further request is read; one request is always read.
const MaxPendingBytes = 16 << 20

// errBatch ends a connection whose client sent a JSON-RPC batch.
var errBatch = errors.New("a JSON-RPC batch is not served: send one message a line (MCP has no batches since 2025-06-18)")

// Stdio is the transport `cordon mcp` serves on: the SDK's stdio transport (one
// message a line on r and w) with two bounds a hostile client needs. The SDK reads
// every request as it comes and queues it, and its answers wait on w: a client that
// writes requests and never reads the answers had cordon hold each one and its
// answer, 1.3 GiB in 20s of tools/list lines (TestRT7MCPPipelinedUnread).
// Stdio reads no further request while [MaxPending] wait for their answers, or
// their parameters reach [MaxPendingBytes] (31 exec calls of 15 MiB with their
// answers unread held 1.1 GiB: TestRT7MCPPipelinedBig), so such a client's writes
// block instead. And a batch (a line that is a JSON array),
// which the SDK would parse and queue whole for a client of protocol 2025-03-26,
// ends the connection.
//
// The bound holds only for a server that answers each request without waiting on
// the client, as this package's does: it sends the client no request. While it is
// reached, a client's cancellation waits with its other messages until an answer
// is written (a call ends at its timeout in any case).
func Stdio(r io.Reader, w io.WriteCloser) gomcp.Transport {
	return &bounded{t: &gomcp.IOTransport{Reader: io.NopCloser(&noBatch{r: r}), Writer: w}, n: MaxPending, bytes: MaxPendingBytes}
}

// bounded is a transport whose connections read no request past n unanswered.
type bounded struct {
	t     gomcp.Transport
	n     int
	bytes int
}

func (b *bounded) Connect(ctx context.Context) (gomcp.Connection, error) {
	c, err := b.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &boundedConn{Connection: c, n: b.n, maxBytes: b.bytes, answered: make(chan struct{}, 1), closed: make(chan struct{}), pending: map[jsonrpc.ID]int{}}, nil
}

// boundedConn is a connection that reads no request while n are unanswered or
// their parameters hold maxBytes. Read is called by one goroutine at a time, Write
// and Close by any.
type boundedConn struct {
	gomcp.Connection
	n        int
	maxBytes int
	answered chan struct{} // a token when an answer was written
	closed   chan struct{}
	once     sync.Once
	// mu guards the fields below.
	mu      sync.Mutex
	pending map[jsonrpc.ID]int // the requests read and not answered: their parameters' size
	bytes   int                // the sum of pending's sizes
}

func (c *boundedConn) full() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) >= c.n || len(c.pending) > 0 && c.bytes >= c.maxBytes
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
		if _, dup := c.pending[req.ID]; !dup { // a duplicate id is refused, its answer not the first's
			c.pending[req.ID] = len(req.Params)
			c.bytes += len(req.Params)
		}
		c.mu.Unlock()
	}
	return msg, err
}

func (c *boundedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		size, was := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.bytes -= size
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
