package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/config"
)

// Warm pools. A tenant with `pool: {size: N}` has N sessions started ahead of any
// request, each on the tenant's base contract in a fresh workspace of its own
// ("warm-" and 16 hex digits), charged to the tenant's quotas like any session. A start
// that names no workspace, no contract and no stage claims one: it is taken from the
// server's list of the tenant's warm sessions and its record loses the warm mark, both
// under the sessions lock, and from then on it is the caller's session like any other.
// Until claimed a warm session is no one's: not listed, its id 404. The pool is
// refilled in the background after each claim, within the tenant's quotas; a warm
// session found dead is marked so and replaced.
//
// Crashes. The claim's record is written atomically but not synced (a sync is most of
// a claim's cost): the daemon dying at any point leaves either the warm record (the
// claim was not answered) or the claimed one, and only a crash of the machine can
// bring a warm record back for a session that was claimed. So a restarted daemon never
// takes a warm session back into its pool: it stops every warm session it finds
// running (adoptSessions) and fills the pool anew. A claimed session has never run
// anything before its claim and is never handed out twice.

// Pool timing: how often a full pool is looked at again (for warm sessions that died),
// how soon a refill is tried again after a start failed or the quotas were full, and
// how long a refill waits after a claim.
const (
	poolCheckEvery  = 10 * time.Second
	poolRetryAfter  = 2 * time.Second
	poolRefillDelay = 250 * time.Millisecond
	warmPrefix      = "warm-"
)

// startPools keeps every pooled tenant's pool full until ctx ends; s.filling is done
// once each refill loop has returned, its last start (which goes on past ctx) ended.
func (s *Server) startPools(ctx context.Context) {
	for _, t := range s.cfg.Tenants {
		if t.Pool != nil {
			s.filling.Go(func() { s.keepWarm(ctx, t) })
		}
	}
}

// keepWarm keeps tenant t's pool full until ctx ends.
func (s *Server) keepWarm(ctx context.Context, t config.Tenant) {
	roots := tenantRootsOf(t)
	refill := s.pool[t.Name]
	for {
		wait := poolCheckEvery
		if !s.fillPool(ctx, roots) {
			wait = poolRetryAfter
		}
		select {
		case <-ctx.Done():
			return
		case <-refill:
			// A claimant's first commands come right after its claim: the refill (a
			// supervisor and a sandbox started, most of a CPU for a second) waits a
			// moment rather than compete with them.
			select {
			case <-ctx.Done():
				return
			case <-time.After(poolRefillDelay):
			}
		case <-time.After(wait):
		}
	}
}

// fillPool starts warm sessions until the pool has its size; false when a start
// failed or the quotas left no room.
func (s *Server) fillPool(ctx context.Context, roots tenantRoots) bool {
	for ctx.Err() == nil {
		if s.warmCount(ctx, roots) >= roots.t.Pool.Size {
			return true
		}
		if err := s.startWarm(ctx, roots); err != nil {
			s.log.Warn("warm pool: no session started", logTenant, roots.t.Name, logErr, err)
			return false
		}
	}
	return false
}

// startWarm starts one warm session of the tenant's pool: a start of the base
// contract in a new workspace, admitted and charged as any start is.
func (s *Server) startWarm(ctx context.Context, roots tenantRoots) error {
	req := api.StartRequest{Workspace: warmPrefix + randomHex(8), Backend: roots.t.Pool.Backend}
	ws := roots.workspace(req.Workspace)
	if err := makeTenantDirs(roots, ws); err != nil {
		return err
	}
	adm, err := s.admitContract(roots, roots.t.Base.YAML(), ws)
	if err != nil {
		return err
	}
	release, err := s.quota.Reserve(roots.t.Name, adm.charge)
	if err != nil {
		return err
	}
	rec, err := s.launch(ctx, roots, req, ws, adm, true)
	if err != nil {
		release()
		return err
	}
	s.hold(roots.t, rec, release)
	s.sess.mu.Lock()
	if s.sess.warm == nil {
		s.sess.warm = map[string][]sessionRecord{}
	}
	s.sess.warm[roots.t.Name] = append(s.sess.warm[roots.t.Name], rec)
	s.sess.mu.Unlock()
	return nil
}

// stopWarm stops every tenant's unclaimed warm sessions at the server's graceful
// stop, once the refills have returned (a start under way is waited for and its
// session stopped with the rest): they are no one's, and left running they would hold
// the tenant's quota and the host's memory until a restart. (A daemon that dies
// leaves them running; the next start stops them, adoptSessions.)
func (s *Server) stopWarm(ctx context.Context) {
	for _, t := range s.cfg.Tenants {
		if t.Pool == nil {
			continue
		}
		roots := tenantRootsOf(t)
		for _, rec := range records(roots) {
			if !rec.Warm || state(roots, rec) != stateRunning {
				continue
			}
			if err := s.stop(ctx, roots, rec); err != nil {
				s.log.Error("warm pool: stopping a session at the server's stop", logTenant, t.Name, logSession, rec.ID, logErr, err)
			}
		}
	}
}

// warmCount is the number of the tenant's warm sessions that run; the ones that no
// longer do leave the list, and a warm session found dead is collected on the way
// (sessions_dead.go) and no longer warm.
func (s *Server) warmCount(ctx context.Context, roots tenantRoots) int {
	s.sess.mu.Lock()
	var kept, gone []sessionRecord
	for _, rec := range s.sess.warm[roots.t.Name] {
		if h := s.sess.holds[roots.t.Name+"/"+rec.ID]; h != nil && !h.stopping && state(roots, rec) == stateRunning {
			kept = append(kept, rec)
		} else {
			gone = append(gone, rec)
		}
	}
	if s.sess.warm != nil {
		s.sess.warm[roots.t.Name] = kept
	}
	s.sess.mu.Unlock()
	var dead []sessionRecord
	for _, old := range gone {
		// Its record as it is now: the reaper may have stopped it meanwhile.
		rec, err := readRecord(roots, old.ID)
		if err != nil || !rec.Warm || state(roots, rec) != stateDead {
			continue
		}
		rec.Warm = false
		_ = writeRecord(roots, rec) // no longer warm, even if it cannot be collected
		dead = append(dead, rec)
	}
	s.collectDead(ctx, roots, dead...)
	return len(kept)
}

// claim takes one of the tenant's running warm sessions for a start asking backend
// ("" or auto for any) and wakes the pool's refill; false when none is ready (the
// start is then a cold one). The claimed record is written unsynced (see Crashes
// above), under the lock that took it off the list: no two claims get one session.
func (s *Server) claim(roots tenantRoots, backend string) (sessionRecord, bool) {
	if roots.t.Pool == nil {
		return sessionRecord{}, false
	}
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	warm := s.sess.warm[roots.t.Name]
	for i, rec := range warm {
		if backend != "" && backend != "auto" && backend != rec.Backend {
			continue
		}
		h := s.sess.holds[roots.t.Name+"/"+rec.ID]
		if h == nil || h.stopping || state(roots, rec) != stateRunning {
			continue // being stopped at its wall time, not charged, or dead: warmCount's
		}
		// The tenant's wall time counts from the claim: the time it waited in the pool
		// was the pool's, not the session's.
		rec.Warm, rec.Claimed = false, true
		rec.ClaimedAt = time.Now().UTC()
		data, _ := json.Marshal(rec)
		if err := atomicfile.WriteUnsynced(roots.record(rec.ID), data, 0o600); err != nil {
			s.log.Error("warm pool: claiming a session", logTenant, roots.t.Name, logSession, rec.ID, logErr, err)
			return sessionRecord{}, false
		}
		s.sess.warm[roots.t.Name] = slices.Delete(slices.Clone(warm), i, i+1)
		h.started = rec.ClaimedAt
		select {
		case s.pool[roots.t.Name] <- struct{}{}:
		default:
		}
		return rec, true
	}
	return sessionRecord{}, false
}

// refillChans is each pooled tenant's refill signal (one pending wake-up at most).
func refillChans(cfg *config.Config) map[string]chan struct{} {
	m := map[string]chan struct{}{}
	for _, t := range cfg.Tenants {
		if t.Pool != nil {
			m[t.Name] = make(chan struct{}, 1)
		}
	}
	return m
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
