package wire

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cordonhq/cordon/internal/paths"
)

// Ask files a request for gate on the sandbox socket sock and waits for its outcome.
// It writes one line to progress (which may be nil) once the request is filed. A
// denial is an Outcome with Approved false, not an error. Cancelling ctx withdraws the
// request.
func Ask(ctx context.Context, sock, gate string, progress io.Writer) (Outcome, error) {
	c, done, err := dial(ctx, sock)
	if err != nil {
		return Outcome{}, err
	}
	defer done()
	if err := c.Write(Request{Op: OpRequest, Gate: gate}); err != nil {
		return Outcome{}, fmt.Errorf("sending request: %w", err)
	}
	for {
		var r SandboxReply
		if err := c.Read(&r); err != nil {
			if ctx.Err() != nil {
				return Outcome{}, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return Outcome{}, fmt.Errorf("gate %s: the gate service went away before deciding", gate)
			}
			return Outcome{}, fmt.Errorf("gate %s: %w", gate, err)
		}
		switch {
		case r.Error != "":
			return Outcome{}, &RemoteError{Msg: r.Error}
		case r.Outcome != nil:
			return *r.Outcome, nil
		case r.Pending != nil && progress != nil:
			fmt.Fprintf(progress, "cordon: gate %s: request %s filed; waiting for a person to run `cordon gate approve %s`\n", gate, r.Pending.ID, r.Pending.ID)
		}
	}
}

// RemoteError is an error the gate service reported.
type RemoteError struct {
	Msg  string
	Code string
}

func (e *RemoteError) Error() string { return e.Msg }

// Is maps CodeNotFound to [ErrNotFound].
func (e *RemoteError) Is(target error) bool {
	return target == ErrNotFound && e.Code == CodeNotFound
}

// List returns the pending requests of the admin socket sock.
func List(ctx context.Context, sock string) ([]Pending, error) {
	r, err := admin(ctx, sock, Request{Op: OpList})
	if err != nil {
		return nil, err
	}
	if r.Pending == nil {
		return []Pending{}, nil
	}
	return r.Pending, nil
}

// Approve approves request id on the admin socket sock; by names the approver. The
// operation starts; its outcome goes to the requester.
func Approve(ctx context.Context, sock, id, by string) error {
	_, err := admin(ctx, sock, Request{Op: OpApprove, ID: id, By: by})
	return err
}

// Deny refuses request id on the admin socket sock.
func Deny(ctx context.Context, sock, id, by, why string) error {
	_, err := admin(ctx, sock, Request{Op: OpDeny, ID: id, By: by, Why: why})
	return err
}

func admin(ctx context.Context, sock string, req Request) (AdminReply, error) {
	c, done, err := dialAs(ctx, sock, paths.Owner())
	if err != nil {
		return AdminReply{}, err
	}
	defer done()
	if err := c.Write(req); err != nil {
		return AdminReply{}, fmt.Errorf("%s: sending %s: %w", sock, req.Op, err)
	}
	var r AdminReply
	if err := c.Read(&r); err != nil {
		if ctx.Err() != nil {
			return AdminReply{}, ctx.Err()
		}
		return AdminReply{}, fmt.Errorf("%s: reading reply to %s: %w", sock, req.Op, err)
	}
	if r.Error != "" {
		return r, &RemoteError{Msg: r.Error, Code: r.Code}
	}
	return r, nil
}
