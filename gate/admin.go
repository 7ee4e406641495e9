package gate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/paths"
)

// This file is the approver's side of a run root: the pending requests of every live
// run under it, and deciding one. `cordon gate` and `cordon serve` (for a tenant's run
// root) both call it, so the two list, show and decide alike.

// The --json documents of `cordon gate ls` and `cordon gate show`, which GET /v1/gates
// and GET /v1/gates/{id} answer too.
const (
	SchemaLs   = "cordon.gate.ls/v1"
	SchemaShow = "cordon.gate.show/v1"
	LsVersion  = 1 // gate_ls_version
)

// List is the document of `cordon gate ls --json`.
type List struct {
	Schema  string         `json:"schema"`
	Version int            `json:"gate_ls_version"`
	Pending []wire.Pending `json:"pending"`
}

// NewList is the document listing ps ([] for none).
func NewList(ps []wire.Pending) List {
	if ps == nil {
		ps = []wire.Pending{}
	}
	return List{Schema: SchemaLs, Version: LsVersion, Pending: ps}
}

// Show is the document of `cordon gate show --json`.
type Show struct {
	Schema  string       `json:"schema"`
	Request wire.Pending `json:"request"`
}

// NewShow is the document showing p.
func NewShow(p wire.Pending) Show { return Show{Schema: SchemaShow, Request: p} }

// adminTimeout bounds each exchange with one admin socket.
const adminTimeout = 5 * time.Second

// ErrInvalidID: an id no request can have. It matches [ErrNotFound] too.
var ErrInvalidID = fmt.Errorf("%w: invalid request id", ErrNotFound)

// idPattern: what [Service] makes is 8 hex digits; allow some room, never a separator.
var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`) })

// ValidateID returns [ErrInvalidID] for an id that no request can have.
func ValidateID(id string) error {
	if !idPattern().MatchString(id) {
		return ErrInvalidID
	}
	return nil
}

// AdminSockets lists the admin sockets of the runs under run root, sorted.
func AdminSockets(root string) []string {
	ms, _ := filepath.Glob(filepath.Join(paths.Root(root).Gates(), "*.sock"))
	sort.Strings(ms)
	return ms
}

// PendingAll lists the pending requests of every live run under run root, oldest
// first. A dead socket (a run that crashed) is skipped; any other failure of a socket
// is given to report, which may be nil, and the others are still asked.
func PendingAll(ctx context.Context, root string, report func(sock string, err error)) []wire.Pending {
	var out []wire.Pending
	for _, sock := range AdminSockets(root) {
		cctx, cancel := context.WithTimeout(ctx, adminTimeout)
		ps, err := wire.List(cctx, sock)
		cancel()
		if errors.Is(err, wire.ErrUnreachable) {
			continue
		}
		if err != nil {
			if report != nil {
				report(sock, err)
			}
			continue
		}
		out = append(out, ps...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Requested.Before(out[j].Requested) })
	return out
}

// Find is the pending request id of a live run under run root; ErrNotFound when none
// has it.
func Find(ctx context.Context, root, id string, report func(sock string, err error)) (wire.Pending, error) {
	if err := ValidateID(id); err != nil {
		return wire.Pending{}, err
	}
	for _, p := range PendingAll(ctx, root, report) {
		if p.ID == id {
			return p, nil
		}
	}
	return wire.Pending{}, fmt.Errorf("%w: %q", ErrNotFound, id)
}

// Decision is an approver's answer to one pending request.
type Decision struct {
	ID   string
	By   string // who decided, as the log records it
	Deny bool   // deny; approve otherwise
	Why  string // the reason the requester is told (deny)
}

// Decide gives d to the run under run root holding request d.ID: approved, its
// operation starts and its output goes to the requester; denied, the requester gets
// d.Why. It returns ErrNotFound when no live run has the request.
func Decide(ctx context.Context, root string, d Decision) error {
	if err := ValidateID(d.ID); err != nil {
		return err
	}
	for _, sock := range AdminSockets(root) {
		cctx, cancel := context.WithTimeout(ctx, adminTimeout)
		var err error
		if d.Deny {
			err = wire.Deny(cctx, sock, d.ID, d.By, d.Why)
		} else {
			err = wire.Approve(cctx, sock, d.ID, d.By)
		}
		cancel()
		switch {
		case errors.Is(err, wire.ErrNotFound), errors.Is(err, wire.ErrUnreachable):
			continue
		case err != nil:
			return fmt.Errorf("%s: %w", filepath.Base(sock), err)
		}
		return nil
	}
	return fmt.Errorf("%w: %q", ErrNotFound, d.ID)
}
