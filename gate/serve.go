package gate

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"

	"github.com/cordonhq/cordon/gate/wire"
)

// ServeSandbox serves the sandbox socket on ln until ctx ends (then it closes ln) or
// ln fails: one request per connection, answered with pending, then the outcome or an
// error. Closing the connection withdraws the request. cmdOf, which may be nil,
// attributes a connection to a command id; the request is refused with its error
// when it cannot (the asking process is gone). It returns nil when ctx ended.
func ServeSandbox(ctx context.Context, ln net.Listener, s *Service, cmdOf func(net.Conn) (string, error)) error {
	return serve(ctx, ln, func(ctx context.Context, c net.Conn) {
		var cmd string
		var err error
		if cmdOf != nil {
			cmd, err = cmdOf(c)
		}
		handleSandbox(ctx, wire.NewConn(c), c, s, cmd, err)
	})
}

func handleSandbox(ctx context.Context, wc *wire.Conn, c net.Conn, s *Service, cmd string, cmdErr error) {
	var req wire.Request
	if err := wc.Read(&req); err != nil {
		return
	}
	if req.Op != wire.OpRequest {
		_ = wc.Write(wire.SandboxReply{Error: "unknown op " + quote(req.Op) + " (the sandbox socket takes \"request\")"})
		return
	}
	if cmdErr != nil {
		_ = wc.Write(wire.SandboxReply{Error: cmdErr.Error()})
		return
	}
	// The requester withdraws by closing: any read returning means it went away.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, c)
		cancel()
	}()
	var wmu sync.Mutex // the filed callback and the final reply do not overlap, but be safe
	out, err := s.request(rctx, req.Gate, cmd, func(p Pending) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = wc.Write(wire.SandboxReply{Pending: &p})
	})
	wmu.Lock()
	defer wmu.Unlock()
	switch {
	case rctx.Err() != nil && err != nil:
		return // withdrawn: nobody to tell
	case err != nil:
		_ = wc.Write(wire.SandboxReply{Error: err.Error()})
	default:
		_ = wc.Write(wire.SandboxReply{Outcome: &out})
	}
}

// ServeAdmin serves the admin socket on ln until ctx ends (then it closes ln) or ln
// fails. Each connection may send any number of ls, approve and deny requests. Only
// the host user may reach it: the caller creates the socket with mode 0600 in a
// private directory. It returns nil when ctx ended.
func ServeAdmin(ctx context.Context, ln net.Listener, s *Service) error {
	return serve(ctx, ln, func(ctx context.Context, c net.Conn) {
		wc := wire.NewConn(c)
		for {
			var req wire.Request
			if err := wc.Read(&req); err != nil {
				return
			}
			if err := wc.Write(adminReply(ctx, s, req)); err != nil {
				return
			}
		}
	})
}

func adminReply(ctx context.Context, s *Service, req wire.Request) wire.AdminReply {
	var err error
	switch req.Op {
	case wire.OpList:
		return wire.AdminReply{Pending: s.List()}
	case wire.OpApprove:
		err = s.Approve(ctx, req.ID, orUnknown(req.By))
	case wire.OpDeny:
		err = s.Deny(req.ID, orUnknown(req.By), req.Why)
	default:
		return wire.AdminReply{Error: "unknown op " + quote(req.Op) + " (want ls, approve or deny)", Code: wire.CodeBad}
	}
	if errors.Is(err, ErrNotFound) {
		return wire.AdminReply{Error: err.Error(), Code: wire.CodeNotFound}
	}
	if err != nil {
		return wire.AdminReply{Error: err.Error()}
	}
	return wire.AdminReply{OK: true}
}

// serve accepts connections on ln and handles each in its own goroutine until ctx
// ends; then it closes ln and the open connections and waits for the handlers.
func serve(ctx context.Context, ln net.Listener, handle func(context.Context, net.Conn)) error {
	var wg sync.WaitGroup
	defer wg.Wait() // last: after cancel has closed every connection
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			unblock := context.AfterFunc(ctx, func() { c.Close() })
			defer unblock()
			handle(ctx, c)
		}()
	}
}

func orUnknown(by string) string {
	if by == "" {
		return "unknown"
	}
	return by
}

func quote(s string) string { return "\"" + s + "\"" }
