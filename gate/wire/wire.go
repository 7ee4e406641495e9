// Package wire is the approval gates' protocol: JSON lines over unix sockets. It imports
// only the standard library, because it is linked into cordon-init, the small binary that
// runs inside every sandbox.
//
// Two sockets speak it. The sandbox socket ([SandboxSocket], open to every process in the
// sandbox) takes one request per connection:
//
//	→ {"op":"request","gate":"push"}
//	← {"pending":{"id":"3fa2c1d0","gate":"push","argv":[…],"preview":"…",…}}
//	← {"outcome":{"approved":true,"exit_code":0,…}}   or   {"error":"…"}
//
// Closing the connection withdraws the request. The admin socket (host only, mode 0600,
// one per run under the run root's gates/) takes any number of requests per connection:
//
//	→ {"op":"ls"}                               ← {"pending":[…]}
//	→ {"op":"approve","id":"…","by":"alice"}    ← {"ok":true}   or {"error":"…","code":"not_found"}
//	→ {"op":"deny","id":"…","by":"alice","why":"…"}
//
// Package gate serves both sockets; this package holds the message types and the
// clients.
package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
)

// SandboxSocket is where the gate socket appears inside a sandbox.
const SandboxSocket = paths.SandboxGate

// MaxLine bounds one protocol line; a longer one is a protocol error.
const MaxLine = 4 << 20

// Operations ([Request.Op]).
const (
	OpRequest = "request" // sandbox socket
	OpList    = "ls"      // admin socket
	OpApprove = "approve" // admin socket
	OpDeny    = "deny"    // admin socket
)

// Error codes ([Reply.Code]).
const (
	CodeNotFound = "not_found" // no pending request has that id
	CodeBad      = "bad"       // malformed or unknown request
)

// Errors returned by the clients.
var (
	// ErrUnreachable: the socket could not be reached (no gates here, or the run ended).
	ErrUnreachable = errors.New("gate socket unreachable")
	// ErrNotFound: no pending request has the id (it was decided, withdrawn, or never
	// existed).
	ErrNotFound = errors.New("no such pending request")
)

// Request is a client's message.
type Request struct {
	Op   string `json:"op"`
	Gate string `json:"gate,omitempty"` // request
	ID   string `json:"id,omitempty"`   // approve, deny
	By   string `json:"by,omitempty"`   // approve, deny: who decided
	Why  string `json:"why,omitempty"`  // deny
}

// Pending is a request waiting for a person.
type Pending struct {
	ID        string    `json:"id"`
	Run       string    `json:"run"`
	Gate      string    `json:"gate"`
	Why       string    `json:"why"` // the contract's why for the gate
	Argv      []string  `json:"argv"`
	Preview   string    `json:"preview"` // what the operation would do, for the approver
	Requested time.Time `json:"requested"`
	Cmd       string    `json:"cmd,omitempty"` // the command that asked, when known
}

// Outcome is how a request ended.
type Outcome struct {
	Approved   bool   `json:"approved"`
	By         string `json:"by,omitempty"`  // who decided ("cordon" for policy refusals)
	Why        string `json:"why,omitempty"` // the denial reason
	ExitCode   int    `json:"exit_code"`     // the operation's exit status (approved only)
	Output     string `json:"output,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Decided is the host's account of one request: the request's id (none when it was
// refused before it was filed), the gate asked for, and its outcome, or why it has
// none (Error: it could not be filed or run, or it was withdrawn).
type Decided struct {
	Request string   `json:"request,omitempty"`
	Gate    string   `json:"gate"`
	Outcome *Outcome `json:"outcome,omitempty"`
	Error   string   `json:"error,omitempty"`
	// OutputCut says the outcome's output is its first part only.
	OutputCut bool `json:"output_cut,omitempty"`
}

// SandboxReply is a message on the sandbox socket: exactly one field is set.
type SandboxReply struct {
	Pending *Pending `json:"pending,omitempty"` // the request was filed
	Outcome *Outcome `json:"outcome,omitempty"` // the request ended
	Error   string   `json:"error,omitempty"`   // the request could not be filed or run
}

// AdminReply is a message on the admin socket: ls answers Pending (omitted when there
// is none), approve and deny answer OK, and any op may answer Error with a Code.
type AdminReply struct {
	Pending []Pending `json:"pending,omitempty"`
	OK      bool      `json:"ok,omitempty"`
	Error   string    `json:"error,omitempty"`
	Code    string    `json:"code,omitempty"`
}

// Conn reads and writes protocol lines. It is not safe for concurrent use.
type Conn struct {
	c   net.Conn
	r   *bufio.Reader
	enc *json.Encoder
}

// NewConn wraps c.
func NewConn(c net.Conn) *Conn {
	return &Conn{c: c, r: bufio.NewReaderSize(c, 64<<10), enc: json.NewEncoder(c)}
}

// Read decodes the next line into v.
func (c *Conn) Read(v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := c.r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > MaxLine {
			return fmt.Errorf("protocol line longer than %d bytes", MaxLine)
		}
		if !isPrefix {
			break
		}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("decoding protocol line: %w", err)
	}
	return nil
}

// Write encodes v as one line.
func (c *Conn) Write(v any) error { return c.enc.Encode(v) }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// dial connects to a unix socket; the connection is closed when ctx ends, which
// unblocks any read.
func dial(ctx context.Context, sock string) (*Conn, func(), error) { return dialAs(ctx, sock, -1) }

// dialAs is dial that, when owner is not -1, keeps the connection only when the
// process answering runs as owner or root (paths.CheckPeer). The admin socket is the
// host's: a socket another uid answers on would take the approvals meant for the run.
// The sandbox socket is not checked: inside, the host's cordon has no mapped uid.
func dialAs(ctx context.Context, sock string, owner int) (*Conn, func(), error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, sock, err)
	}
	if owner != -1 {
		if err := paths.CheckPeer(c, owner); err != nil {
			c.Close()
			return nil, nil, err
		}
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	return NewConn(c), func() { stop(); c.Close() }, nil
}
