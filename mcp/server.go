// Package mcp is cordon as an agent's shell over the Model Context Protocol: an MCP
// server ([New]) whose tools run in one cordon session, so that every command and every
// file the agent touches is under the session's contract, in its sandbox, and in its
// audit log (docs/mcp.md). `cordon mcp` serves it on stdio, one session per
// connection. It is built on the official Go SDK, github.com/modelcontextprotocol/go-sdk.
//
// The tools: exec (a shell command line), read_file, write_file, edit_file,
// list_files and changes (the session's sweep); checkpoint and rollback for a staged
// session, and gate when the contract has gates a person may approve. The file tools never open a path on
// the host: each runs cordon's own binary inside the sandbox (`cordon internal file`,
// package sandboxinit/fileop) through the session's exec path, so the contract
// decides what it may read and write, and the log records it as a command.
//
// Unstable until v1.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Session is the part of a [session.Session] the server uses.
type Session interface {
	ID() string
	Exec(ctx context.Context, argv []string, o session.ExecOptions) (*wire.Result, error)
	Sweep(ctx context.Context) (session.Turn, error)
}

// Options configure [New]. Zero fields mean defaults.
type Options struct {
	// Version is the server's version in the MCP handshake.
	Version string
	// Helper is cordon's binary inside the sandbox, which runs the file tools;
	// "" means paths.SandboxInit, where every backend puts it.
	Helper string
	// Shell runs exec's command line ("" means /bin/sh).
	Shell string
	// MaxCalls bounds the tool calls running at once (0 means DefaultMaxCalls); one
	// past it is refused, not queued.
	MaxCalls int
	// Stage lists the checkpoint and rollback tools: the session is staged (and
	// implements [Staged]). Otherwise they are not listed.
	Stage bool
	// Gates are the contract's gates a person may approve; the gate tool is listed
	// when there is one, and asks only for these.
	Gates []Gate
	// MaxTimeout bounds exec's timeout_seconds (0 means MaxTimeout): a server holds a
	// call to its session's command timeout.
	MaxTimeout time.Duration
	// SessionID is the MCP session id the server gives its one session over the
	// streamable HTTP transport ("" lets the SDK choose); over stdio there is none.
	SessionID string
}

// DefaultMaxCalls is Options.MaxCalls' default: an agent runs a few tools at once, a
// client that sends hundreds is refused rather than served with hundreds of commands
// and their buffers.
const DefaultMaxCalls = 16

// New returns an MCP server whose tools run in sess. The server holds no other state:
// sess outlives it, and the caller stops it when the connection ends.
func New(sess Session, o Options) *gomcp.Server {
	if o.Helper == "" {
		o.Helper = paths.SandboxInit
	}
	if o.Shell == "" {
		o.Shell = "/bin/sh"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	if o.MaxTimeout <= 0 || o.MaxTimeout > MaxTimeout {
		o.MaxTimeout = MaxTimeout
	}
	var sessionID func() string
	if o.SessionID != "" {
		sessionID = func() string { return o.SessionID }
	}
	s := gomcp.NewServer(&gomcp.Implementation{Name: "cordon", Title: "cordon sandboxed shell", Version: o.Version}, &gomcp.ServerOptions{
		GetSessionID: sessionID,
		Instructions: "Every tool runs inside one cordon sandbox (session " + sess.ID() + "), under its contract: " +
			"what it may read, write and reach on the network. A refusal comes back as a tool error that says why; " +
			"it is the contract's answer, not a fault to retry. Call changes at the end of a turn.",
	})
	l := &limited{Session: sess, slots: make(chan struct{}, o.MaxCalls)}
	t := &tools{sess: l, o: o}
	t.addExec(s)
	t.addFiles(s)
	t.addChanges(s)
	if st, ok := sess.(Staged); ok && o.Stage {
		l.staged = st
		t.addStaged(s, l)
	}
	if len(o.Gates) > 0 {
		// Only a gate name the schema package cannot take fails here; the contract's
		// gate names are all plain words.
		if err := t.addGate(s, o.Gates); err != nil {
			panic(fmt.Sprintf("mcp: gate tool: %v", err))
		}
	}
	return s
}

// tools are the server's tool handlers, over one session.
type tools struct {
	sess   Session
	staged Staged // nil unless the checkpoint and rollback tools are listed
	o      Options
}

// limited is a Session that runs at most cap(slots) calls at once. Safe for
// concurrent use.
type limited struct {
	Session
	staged Staged // sess as a Staged, when it is one
	slots  chan struct{}
}

// errBusy refuses a call past Options.MaxCalls.
var errBusy = errors.New("too many tool calls are running at once; wait for one to end")

func (l *limited) acquire() error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
		return fmt.Errorf("%w (at most %d)", errBusy, cap(l.slots))
	}
}

func (l *limited) Exec(ctx context.Context, argv []string, o session.ExecOptions) (*wire.Result, error) {
	if err := l.acquire(); err != nil {
		return nil, err
	}
	defer func() { <-l.slots }()
	return l.Session.Exec(ctx, argv, o)
}

func (l *limited) Sweep(ctx context.Context) (session.Turn, error) {
	if err := l.acquire(); err != nil {
		return session.Turn{}, err
	}
	defer func() { <-l.slots }()
	return l.Session.Sweep(ctx)
}

func (l *limited) Checkpoint(ctx context.Context, name string) (wire.Checkpoint, []string, error) {
	if err := l.acquire(); err != nil {
		return wire.Checkpoint{}, nil, err
	}
	defer func() { <-l.slots }()
	return l.staged.Checkpoint(ctx, name)
}

func (l *limited) Rollback(ctx context.Context, to string) (wire.Checkpoint, []string, []string, error) {
	if err := l.acquire(); err != nil {
		return wire.Checkpoint{}, nil, nil, err
	}
	defer func() { <-l.slots }()
	return l.staged.Rollback(ctx, to)
}

func ptr[T any](v T) *T { return &v }

// text is a tool result of one text block.
func text(isError bool, format string, args ...any) *gomcp.CallToolResult {
	return &gomcp.CallToolResult{IsError: isError, Content: []gomcp.Content{&gomcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// checkPath refuses a path no command could name: empty, with a NUL byte, or past
// the kernel's PATH_MAX.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("path is empty")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("path holds a NUL byte, which no file name can")
	case len(p) > 4096:
		return errors.New("path is longer than 4096 bytes")
	}
	return nil
}

// shown is a path as a tool's text gives it: as it is, or quoted (Go's syntax) when it
// holds a control character or is not UTF-8, so that a name the sandbox chose can
// neither forge a line of a listing nor reach the client's terminal as an escape.
// The structured result keeps the name as it is.
func shown(p string) string {
	if utf8.ValidString(p) && !strings.ContainsFunc(p, unicode.IsControl) {
		return p
	}
	return strconv.Quote(p)
}

// lines is paths shown one a line.
func lines(paths []string) string {
	var b strings.Builder
	for i, p := range paths {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(shown(p))
	}
	return b.String()
}

// problem words a session client's failure for the agent: what cordon said, which
// for a refusal names the rule.
func problem(err error) error {
	var se *session.Error
	if errors.As(err, &se) {
		return fmt.Errorf("cordon could not run it: %s", se.Msg)
	}
	return fmt.Errorf("cordon could not run it: %w", err)
}

func (t *tools) addChanges(s *gomcp.Server) {
	gomcp.AddTool(s, &gomcp.Tool{
		Name:  "changes",
		Title: "End the turn: paths changed",
		Description: "Ends the agent's turn: returns the workspace paths changed since the previous call (by any tool or command), " +
			"and deletes the session's spill files (the whole outputs that exec cut), which are then gone. Call it once per turn, at its end.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, t.changes)
}

// ChangesOutput is the changes tool's result.
type ChangesOutput struct {
	Changed           []string `json:"changed" jsonschema:"workspace paths changed since the previous call, sorted"`
	RemovedSpillFiles int      `json:"removed_spill_files" jsonschema:"spill files deleted"`
	More              int      `json:"more" jsonschema:"changes past the list's bounds (10000 paths, 512 KiB), not in changed: not 0, the list is incomplete"`
}

func (t *tools) changes(ctx context.Context, _ *gomcp.CallToolRequest, _ struct{}) (*gomcp.CallToolResult, ChangesOutput, error) {
	turn, err := t.sess.Sweep(ctx)
	if err != nil {
		return nil, ChangesOutput{}, problem(err)
	}
	out := ChangesOutput{Changed: turn.Changed, RemovedSpillFiles: turn.Removed, More: turn.More}
	if out.Changed == nil {
		out.Changed = []string{}
	}
	summary := fmt.Sprintf("%d path(s) changed; %d spill file(s) removed", len(out.Changed), out.RemovedSpillFiles)
	if len(out.Changed) > 0 {
		summary += ":\n" + lines(out.Changed)
	}
	if out.More > 0 {
		summary += fmt.Sprintf("\ntruncated: %d more change(s) not listed", out.More)
	}
	return text(false, "%s", summary), out, nil
}
