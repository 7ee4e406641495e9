package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/session"
)

// A session is charged to its tenant's quotas (package quota) from before its start
// until it ends: stopped through the API, its supervisor gone, or its wall time over
// (the reaper then stops it). A restarted server charges every session still running
// before it serves (adoptSessions), from the charge in the session's record.

// reapEvery is how often the reaper looks at the live sessions.
const reapEvery = 2 * time.Second

// hold is one live session's charge.
type hold struct {
	tenant  config.Tenant
	id      string
	started time.Time // when its wall time started (sessionRecord.wallFrom)
	release func()
	// stopping: the reaper is stopping it at its wall time; a claim passes it over.
	stopping bool
}

// hold keeps rec's charge (release gives it back) until the session ends.
func (s *Server) hold(t config.Tenant, rec sessionRecord, release func()) {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	if s.sess.holds == nil {
		s.sess.holds = map[string]*hold{}
	}
	s.sess.holds[t.Name+"/"+rec.ID] = &hold{tenant: t, id: rec.ID, started: rec.wallFrom(), release: release}
}

// unhold gives session id's charge back, once.
func (s *Server) unhold(tenant, id string) {
	s.sess.mu.Lock()
	h := s.sess.holds[tenant+"/"+id]
	delete(s.sess.holds, tenant+"/"+id)
	s.sess.mu.Unlock()
	if h != nil {
		h.release()
	}
}

// lockWorkspace reserves a workspace of the tenant for one start: refused while
// another start in it is in flight or a session runs in it.
func (s *Server) lockWorkspace(roots tenantRoots, name string) (unlock func(), err error) {
	key := roots.t.Name + "/" + name
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	if s.sess.starting[key] || s.sess.warming[key] {
		return nil, fmt.Errorf("workspace %s: a session is starting in it", name)
	}
	for _, rec := range records(roots) {
		if rec.Workspace == name && state(roots, rec) == stateRunning {
			return nil, fmt.Errorf("workspace %s: session %s runs in it; one session per workspace", name, rec.ID)
		}
	}
	if s.sess.starting == nil {
		s.sess.starting = map[string]bool{}
	}
	s.sess.starting[key] = true
	return func() {
		s.sess.mu.Lock()
		defer s.sess.mu.Unlock()
		delete(s.sess.starting, key)
	}, nil
}

// adoptSessions, before the server serves, charges every session still running in
// each tenant's records, even past a quota (they exist); stops every warm session
// still running (pool.go: a restarted server never pools a session again); collects
// the ones whose supervisor died meanwhile (sessions_dead.go: log sealed, credentials
// revoked); and stops any running session the server has no record of.
func (s *Server) adoptSessions(ctx context.Context) {
	for _, t := range s.cfg.Tenants {
		roots := tenantRootsOf(t)
		var dead, warm []sessionRecord
		for _, rec := range records(roots) {
			switch st := state(roots, rec); {
			case st == stateDead && rec.Ended == "":
				dead = append(dead, rec)
				continue
			case st != stateRunning:
				continue
			case rec.Warm:
				warm = append(warm, rec)
				continue
			}
			release, err := s.quota.Adopt(t.Name, rec.Charge, rec.wallFrom())
			if err != nil {
				s.log.Error("charging a running session", logTenant, t.Name, logSession, rec.ID, logErr, err)
				continue
			}
			s.hold(t, rec, release)
			s.log.Info("session adopted", logTenant, t.Name, logSession, rec.ID, "warm", rec.Warm)
		}
		s.stopLeftWarm(ctx, roots, warm)
		s.collectDead(ctx, roots, dead...) // one cordon gc for all
		s.stopUnrecorded(ctx, roots)
		s.removeOrphanWarm(roots) // once no session it could be is running
	}
}

// stopLeftWarm stops, all at once, the warm sessions a server that died left
// running. Its record may say warm for a session that was claimed (the claim's write
// is not synced, pool.go), so none is pooled again; each stays the server's, never
// listed. One whose workspace is empty never ran anything and is retired (workspace
// and record removed); one whose workspace is not (a claim a crash lost) keeps both,
// hidden, its log in the tenant's audit root.
func (s *Server) stopLeftWarm(ctx context.Context, roots tenantRoots, warm []sessionRecord) {
	var wg sync.WaitGroup
	for _, rec := range warm {
		wg.Go(func() {
			if err := s.stop(ctx, roots, rec); err != nil {
				// Charged, not pooled: the reaper tries the stop again at its wall time.
				s.log.Error("warm pool: stopping a session a previous server left", logTenant, roots.t.Name, logSession, rec.ID, logErr, err)
				if release, err := s.quota.Adopt(roots.t.Name, rec.Charge, rec.wallFrom()); err == nil {
					s.hold(roots.t, rec, release)
				}
				return
			}
			s.log.Info("warm pool: stopped a session a previous server left", logTenant, roots.t.Name, logSession, rec.ID)
			s.forgetWarm(roots, rec, true)
		})
	}
	wg.Wait()
}

// reap gives back the charges of sessions that ended, and stops sessions past their
// tenant's wall time, until ctx ends.
func (s *Server) reap(ctx context.Context) {
	tick := time.NewTicker(reapEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.sess.mu.Lock()
		hs := make([]hold, 0, len(s.sess.holds))
		for _, h := range s.sess.holds {
			hs = append(hs, *h)
		}
		s.sess.mu.Unlock()
		for _, h := range hs {
			s.reapOne(ctx, h)
		}
	}
}

func (s *Server) reapOne(ctx context.Context, h hold) {
	roots := tenantRootsOf(h.tenant)
	rec, err := readRecord(roots, h.id)
	switch {
	case err != nil:
		s.unhold(h.tenant.Name, h.id)
		return
	case state(roots, rec) == stateDead:
		s.collectDead(ctx, roots, rec) // its charge given back too
		return
	case state(roots, rec) != stateRunning:
		s.unhold(h.tenant.Name, h.id)
		return
	}
	if !s.markStopping(h) {
		return
	}
	if rec.Warm && s.takeWarm(h.tenant.Name, rec.Pool, rec.ID) {
		// Unclaimed past the wall time: retired, and the pool starts a fresh one.
		s.retireWarm(ctx, roots, rec, "the tenant's wall time")
		return
	}
	s.log.Info("stopping a session at its tenant's wall time", logTenant, h.tenant.Name, logSession, h.id)
	sess, err := session.OpenWith(roots.env(), h.id)
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, stopTimeout)
		err = sess.Stop(sctx)
		cancel()
	}
	if err != nil {
		s.log.Error("stopping a session at its wall time", logTenant, h.tenant.Name, logSession, h.id, logErr, err)
		return // tried again at the next pass
	}
	if now, err := readRecord(roots, h.id); err == nil {
		rec = now // not the copy read before the stop: a claim may have written since
	}
	rec.Stopped = true
	if err := writeRecord(roots, rec); err == nil {
		removeContract(roots, rec)
		if rec.Warm {
			// A warm session off every pool's list (its retirement failed, or a dead
			// server left it): its workspace goes only when empty (forgetWarm).
			s.forgetWarm(roots, rec, true)
		}
	}
	s.unhold(h.tenant.Name, h.id)
}

// markStopping reports whether h's session is past its tenant's wall time, by the
// hold as it is now (a claim restarts the clock), and marks it being stopped so no
// claim hands it out meanwhile.
func (s *Server) markStopping(h hold) bool {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	cur := s.sess.holds[h.tenant.Name+"/"+h.id]
	if cur == nil || time.Since(cur.started) < s.quota.Wall(h.tenant.Name) {
		return false
	}
	cur.stopping = true
	return true
}

// liveSessions counts each tenant's live sessions for /metrics: the ones charged.
type liveSessions struct{ s *Server }

func (l liveSessions) Sessions() map[string]int {
	l.s.sess.mu.Lock()
	defer l.s.sess.mu.Unlock()
	n := map[string]int{}
	for _, h := range l.s.sess.holds {
		n[h.tenant.Name]++
	}
	return n
}
