package server

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// A session whose supervisor died (killed, out of memory, the host went down) could
// not tear itself down: its log has no run.end seal, its credentials were not revoked,
// and its run directory, cgroup or container may be left. The server collects such a
// session as soon as it finds it dead: when it restarts (adoptSessions), at every pass
// of the reaper, and when the warm pool counts its sessions. Collecting runs `cordon
// gc` on the tenant's run root, the one mechanism cordon has for dead runs: it seals
// the log (audit.SealAbandoned, run.end saying why), revokes the run's credentials,
// and removes its run directory, cgroup, containers and uid lease. The session's
// charge is given back and its record says it ended, and why.

// Bounds of a collection.
const (
	gcTimeout   = 2 * time.Minute
	maxGCOutput = 64 << 10 // bytes of cordon gc's output logged
)

// Why a collected session ended, in its record and in the API's session.
const (
	endedDied     = "its supervisor died; its log was sealed for it (run.end says so), its credentials revoked and what it left removed"
	endedOutside  = "its supervisor ended without the server (its log was sealed)"
	endedUnsealed = "its supervisor died; its log could not be sealed: "
)

// collectDead collects sessions recs of the tenant, whose supervisors are gone (the
// caller found them dead), with one cordon gc, and records why each ended. It never
// fails: what cannot be done is logged, and each record says whether its log is
// sealed.
func (s *Server) collectDead(ctx context.Context, roots tenantRoots, recs ...sessionRecord) {
	s.collectMu.Lock() // one collection at a time: one cordon gc, one writer of a log
	defer s.collectMu.Unlock()
	type dead struct {
		rec    sessionRecord
		sealed bool // before gc
	}
	var todo []dead
	for _, rec := range recs {
		s.unhold(roots.t.Name, rec.ID)
		now, err := readRecord(roots, rec.ID)
		if err != nil || now.Ended != "" || state(roots, now) != stateDead {
			continue // collected already, or not dead
		}
		before, _ := audit.Verify(roots.events(rec.ID))
		todo = append(todo, dead{now, before.Sealed})
	}
	if len(todo) == 0 {
		return
	}
	s.gc(ctx, roots)
	for _, d := range todo {
		s.recordDead(roots, d.rec, d.sealed)
	}
}

// recordDead checks, once gc ran, that the log of dead session rec is sealed (sealing
// it when gc no longer had the run), and records why the session ended.
func (s *Server) recordDead(roots tenantRoots, rec sessionRecord, sealedBefore bool) {
	events := roots.events(rec.ID)
	rep, err := audit.Verify(events)
	if err != nil && !rep.Sealed && !s.runLive(roots, rec.ID) {
		// The run directory was gone already (a start's own gc took it, or the
		// supervisor died in its teardown): gc could not know the log. Same seal.
		_, err = audit.SealAbandoned(filepath.Dir(events), audit.RunEnd{ExitCode: 125, Reason: audit.ReasonError,
			Detail: runner.AbandonedDetail + "; sealed by cordon serve"})
		if err == nil {
			rep, err = audit.Verify(events)
		}
	}
	switch {
	case err != nil:
		rec.Ended = endedUnsealed + err.Error()
		s.log.Error("session died; its log is not sealed", logTenant, roots.t.Name, logSession, rec.ID, logErr, err)
		s.metrics.seal(roots.t.Name, false)
	case sealedBefore:
		rec.Ended = endedOutside
		s.log.Info("session ended without the server", logTenant, roots.t.Name, logSession, rec.ID)
	default:
		rec.Ended = endedDied
		s.log.Warn("session died; log sealed", logTenant, roots.t.Name, logSession, rec.ID, logAuditHead, rep.Head)
		s.metrics.seal(roots.t.Name, true)
	}
	if err := writeRecord(roots, rec); err != nil {
		s.log.Error("recording a dead session", logTenant, roots.t.Name, logSession, rec.ID, logErr, err)
		return
	}
	removeContract(roots, rec)
	forgetStopped(roots)
}

// runLive reports whether run id of the tenant may still write its log.
func (s *Server) runLive(roots tenantRoots, id string) bool {
	live := s.live
	if live == nil {
		live = runner.Live
	}
	return live(roots.run, id)
}

// gc runs `cordon gc` on the tenant's run root, and logs what it did. s.collectMu
// must be held.
func (s *Server) gc(ctx context.Context, roots tenantRoots) {
	if s.gcCmd != nil {
		s.gcCmd(ctx, roots)
		return
	}
	self, err := os.Executable()
	if err != nil {
		s.log.Error("cordon gc", logTenant, roots.t.Name, logErr, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gcTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "gc", "--run-root", roots.run.String())
	cmd.Env = slices.DeleteFunc(roots.env(), func(kv string) bool { return strings.HasPrefix(kv, "CORDON_HOST=") })
	out := &capped{max: maxGCOutput}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	for _, l := range strings.Split(strings.TrimSpace(out.b.String()), "\n") {
		if l != "" {
			s.log.Info("cordon gc", logTenant, roots.t.Name, "said", l)
		}
	}
	if err != nil {
		s.log.Error("cordon gc", logTenant, roots.t.Name, logErr, err)
	}
}

// capped keeps the first max bytes written to it.
type capped struct {
	b   bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// stopUnrecorded stops the tenant's live sessions that have no record of the server:
// a daemon killed between a supervisor's start and its record left them, and no one
// would ever stop them. Only the server starts sessions in a tenant's run root, and it
// calls this before it serves, when no start is in flight.
func (s *Server) stopUnrecorded(ctx context.Context, roots tenantRoots) {
	for _, si := range wire.List(roots.run.Sessions()) {
		if !si.Alive() || !validSessionID(si.ID) {
			continue
		}
		if _, err := readRecord(roots, si.ID); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		s.log.Warn("stopping a session the server has no record of", logTenant, roots.t.Name, logSession, si.ID)
		sess, err := session.OpenWith(roots.env(), si.ID)
		if err == nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			err = sess.Stop(sctx)
			cancel()
		}
		if err != nil {
			s.log.Error("stopping a session the server has no record of", logTenant, roots.t.Name, logSession, si.ID, logErr, err)
		}
	}
}
