package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/server/quota"
)

// Warm pools. A tenant's config names its pools (`pools:`), each of one contract (its
// own file, or the tenant's base) checked against the base when the config is loaded.
// A pool of size N has N sessions started ahead of any request, each in a fresh
// workspace of its own ("warm-" and 16 hex digits), charged to the tenant's quotas
// like any session. A start naming the pool (`{"pool": NAME}`) claims one, and so does
// a start naming nothing (no pool, workspace, contract or stage) from a pool of the
// base contract: it is taken from the server's list of the pool's warm sessions and
// its record loses the warm mark, both under the sessions lock, and from then on it
// is the caller's session like any other. Until claimed a warm session is no one's:
// not listed, its id 404. A pool is refilled in the background after each claim,
// within the tenant's quotas; a warm session found dead is marked so and replaced.
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

// poolKey names a tenant's pool in the server's maps.
func poolKey(tenant, pool string) string { return tenant + "/" + pool }

// startPools keeps every pool full until ctx ends; s.filling is done once each refill
// loop has returned, its last start (which goes on past ctx) ended.
func (s *Server) startPools(ctx context.Context) {
	for _, t := range s.cfg.Tenants {
		for _, p := range t.Pools {
			s.filling.Go(func() { s.keepWarm(ctx, t, p) })
		}
	}
}

// keepWarm keeps tenant t's pool p full until ctx ends.
func (s *Server) keepWarm(ctx context.Context, t config.Tenant, p config.Pool) {
	roots := tenantRootsOf(t)
	refill := s.pool[poolKey(t.Name, p.Name)]
	for {
		wait := poolCheckEvery
		if !s.fillPool(ctx, roots, p) {
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

// fillPool starts warm sessions until pool p has its size; false when a start failed
// or the quotas left no room.
func (s *Server) fillPool(ctx context.Context, roots tenantRoots, p config.Pool) bool {
	for ctx.Err() == nil {
		if s.warmCount(ctx, roots, p) >= p.Size {
			return true
		}
		if err := s.startWarm(ctx, roots, p); err != nil {
			s.log.Warn("warm pool: no session started", logTenant, roots.t.Name, logPool, p.Name, logErr, err)
			return false
		}
	}
	return false
}

// startWarm starts one warm session of pool p: a start of the pool's contract in a new
// workspace, admitted and charged as any start is.
func (s *Server) startWarm(ctx context.Context, roots tenantRoots, p config.Pool) error {
	req := api.StartRequest{Workspace: warmPrefix + randomHex(8), Backend: p.Backend, Stage: p.Stage}
	ws := roots.workspace(req.Workspace)
	// The workspace is the server's from before it is made until the session's record
	// says warm (then isWarm hides it): never listed, uploaded into, started in,
	// downloaded or deleted by the tenant, whose files would be in the session the
	// next claimant gets.
	done := s.warming(roots, req.Workspace)
	defer done()
	// A refill that cannot start is tried again every poolRetryAfter, for as long as
	// the server runs: each try leaves nothing behind, or the tenant's workspaces root
	// would gain an empty warm-* directory every try (listed as the tenant's, counted
	// against its workspaces quota, and without bound on its disk's inodes).
	launched := false
	defer func() {
		if !launched {
			if err := linux.RemoveTree(ws); err != nil {
				s.log.Error("warm pool: removing a workspace no session started in", logTenant, roots.t.Name, logPool, p.Name, logErr, err)
			}
		}
	}()
	if err := makeTenantDirs(roots, ws); err != nil {
		return err
	}
	adm, err := s.admitContract(roots, p.YAML, ws)
	if err != nil {
		return err
	}
	release, err := s.quota.Reserve(roots.t.Name, adm.charge)
	if err != nil {
		return err
	}
	rec, err := s.launch(ctx, roots, req, ws, adm, p.Name)
	if err != nil {
		release()
		return err
	}
	launched = true
	s.hold(roots.t, rec, release)
	key := poolKey(roots.t.Name, p.Name)
	s.sess.mu.Lock()
	if s.sess.warm == nil {
		s.sess.warm = map[string][]sessionRecord{}
	}
	s.sess.warm[key] = append(s.sess.warm[key], rec)
	s.sess.mu.Unlock()
	return nil
}

// warming marks the workspace name of tenant roots a warm session's being started,
// until done is called.
func (s *Server) warming(roots tenantRoots, name string) (done func()) {
	key := roots.t.Name + "/" + name
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	if s.sess.warming == nil {
		s.sess.warming = map[string]bool{}
	}
	s.sess.warming[key] = true
	return func() {
		s.sess.mu.Lock()
		defer s.sess.mu.Unlock()
		delete(s.sess.warming, key)
	}
}

// isWarming reports whether the workspace name is a warm session's being started.
func (s *Server) isWarming(roots tenantRoots, name string) bool {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	return s.sess.warming[roots.t.Name+"/"+name]
}

// stopWarm stops every pool's unclaimed warm sessions at the server's graceful stop,
// once the refills have returned (a start under way is waited for and its session
// stopped with the rest): they are no one's, and left running they would hold the
// tenant's quota and the host's memory until a restart. (A daemon that dies leaves
// them running; the next start stops them, adoptSessions.)
func (s *Server) stopWarm(ctx context.Context) {
	s.sess.mu.Lock()
	warm := s.sess.warm
	s.sess.warm = nil
	s.sess.mu.Unlock()
	for _, t := range s.cfg.Tenants {
		roots := tenantRootsOf(t)
		for _, p := range t.Pools {
			for _, rec := range warm[poolKey(t.Name, p.Name)] {
				s.retireWarm(ctx, roots, rec, "the server's stop")
			}
		}
	}
}

// retireWarm stops a warm session this server started and no one claimed (it is on a
// pool's list, or was until the caller took it off) and removes its workspace and
// record: no one's, they would otherwise stay hidden from the tenant until the record
// was forgotten, and then be the tenant's (a workspace it never made, counted against
// its quota). A session it cannot stop stays recorded and charged; the reaper tries
// again.
func (s *Server) retireWarm(ctx context.Context, roots tenantRoots, rec sessionRecord, why string) {
	if err := s.stop(ctx, roots, rec); err != nil {
		s.log.Error("warm pool: stopping a session", logTenant, roots.t.Name, logPool, rec.Pool, logSession, rec.ID, logReason, why, logErr, err)
		return
	}
	s.forgetWarm(roots, rec, false)
	s.log.Info("warm pool: session retired", logTenant, roots.t.Name, logPool, rec.Pool, logSession, rec.ID, logReason, why)
}

// forgetWarm removes an ended warm session's workspace, then its record (until then
// its workspace's name stays the server's: no start or upload takes it). unsure is a
// session not on this server's lists (a dead server left it): after a crash of the
// machine its record may say warm for a session that was claimed (see Crashes above),
// whose workspace holds its claimant's files, so its workspace and record go only
// when the workspace is empty (an unclaimed session's is: its placeholders went with
// it); else both are kept as they are, hidden (the server cannot tell whose it is).
func (s *Server) forgetWarm(roots tenantRoots, rec sessionRecord, unsure bool) {
	if !rec.Warm || !strings.HasPrefix(rec.Workspace, warmPrefix) || !validWorkspaceName(rec.Workspace) {
		return
	}
	ws := roots.workspace(rec.Workspace)
	if unsure {
		if empty, err := isEmpty(ws); err != nil || !empty {
			s.log.Warn("warm pool: kept the workspace of a stopped session: it is not empty (a claim a crash lost?)",
				logTenant, roots.t.Name, logSession, rec.ID, logWorkspace, rec.Workspace)
			return
		}
	}
	if err := linux.RemoveTree(ws); err != nil {
		s.log.Error("warm pool: removing a retired session's workspace", logTenant, roots.t.Name, logSession, rec.ID, logErr, err)
		return
	}
	removeContract(roots, rec)
	if err := os.Remove(roots.record(rec.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Error("warm pool: removing a retired session's record", logTenant, roots.t.Name, logSession, rec.ID, logErr, err)
	}
}

// takeWarm takes the session id off its pool's list; false when it was on none (it
// was claimed, or is not a warm session of this server's).
func (s *Server) takeWarm(tenant, pool, id string) bool {
	key := poolKey(tenant, pool)
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	for i, rec := range s.sess.warm[key] {
		if rec.ID == id {
			s.sess.warm[key] = slices.Delete(slices.Clone(s.sess.warm[key]), i, i+1)
			return true
		}
	}
	return false
}

// warmCount is the number of pool p's warm sessions that run; the ones that no longer
// do leave the list, and a warm session found dead is collected on the way
// (sessions_dead.go) and no longer warm.
func (s *Server) warmCount(ctx context.Context, roots tenantRoots, p config.Pool) int {
	key := poolKey(roots.t.Name, p.Name)
	s.sess.mu.Lock()
	var kept, gone []sessionRecord
	for _, rec := range s.sess.warm[key] {
		if h := s.sess.holds[roots.t.Name+"/"+rec.ID]; h != nil && !h.stopping && state(roots, rec) == stateRunning {
			kept = append(kept, rec)
		} else {
			gone = append(gone, rec)
		}
	}
	if s.sess.warm != nil {
		s.sess.warm[key] = kept
	}
	s.sess.mu.Unlock()
	var dead []sessionRecord
	for _, old := range gone {
		// Its record as it is now: the reaper may have stopped (and retired) it.
		rec, err := readRecord(roots, old.ID)
		if err != nil || !rec.Warm || state(roots, rec) != stateDead {
			continue
		}
		dead = append(dead, rec)
	}
	if len(dead) > 0 {
		s.collectDead(ctx, roots, dead...) // its log sealed, its charge given back
		for _, rec := range dead {
			if now, err := readRecord(roots, rec.ID); err == nil && now.Ended != "" {
				s.forgetWarm(roots, now, false)
			}
		}
	}
	return len(kept)
}

// claim takes one of pool p's running warm sessions for a start asking backend (""
// or auto for any) and wakes the pool's refill; false when none is ready. The claimed
// record is written unsynced (see Crashes above), under the lock that took it off
// the list: no two claims get one session.
func (s *Server) claim(roots tenantRoots, p config.Pool, backend string) (sessionRecord, bool) {
	key := poolKey(roots.t.Name, p.Name)
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	warm := s.sess.warm[key]
	for i, rec := range warm {
		if backend != "" && backend != "auto" && backend != rec.Backend {
			continue
		}
		h := s.readyWarm(roots, rec)
		if h == nil {
			continue // being stopped at its wall time, not charged, or dead: warmCount's
		}
		// The tenant's wall time counts from the claim: the time it waited in the pool
		// was the pool's, not the session's.
		rec.Warm, rec.Claimed = false, true
		rec.ClaimedAt = time.Now().UTC()
		data, _ := json.Marshal(rec)
		if err := atomicfile.WriteUnsynced(roots.record(rec.ID), data, 0o600); err != nil {
			s.log.Error("warm pool: claiming a session", logTenant, roots.t.Name, logPool, p.Name, logSession, rec.ID, logErr, err)
			return sessionRecord{}, false
		}
		s.sess.warm[key] = slices.Delete(slices.Clone(warm), i, i+1)
		h.started = rec.ClaimedAt
		// The ledger's charge too counts its wall time from the claim (a refused
		// start's Retry-After is the earliest end): charged again from now, then the
		// pool's charge given back, so the tenant is never under-charged meanwhile.
		if release, err := s.quota.Adopt(roots.t.Name, rec.Charge, rec.ClaimedAt); err == nil {
			old := h.release
			h.release = release
			old()
		}
		select {
		case s.pool[key] <- struct{}{}:
		default:
		}
		return rec, true
	}
	return sessionRecord{}, false
}

// readyWarm is the hold of warm session rec, on its pool's list, when a claim may
// take it: charged, not being stopped at its wall time, running; nil otherwise.
// s.sess.mu must be held.
func (s *Server) readyWarm(roots tenantRoots, rec sessionRecord) *hold {
	h := s.sess.holds[roots.t.Name+"/"+rec.ID]
	if h == nil || h.stopping || state(roots, rec) != stateRunning {
		return nil
	}
	return h
}

// readyWarmCounts is, by poolKey, how many warm sessions each pool of the config has
// that a claim would take now (readyWarm), for the cordon_pool_warm gauge. A session's
// record says warm from its launch, before it is charged and on its pool's list:
// only this says it can be claimed.
func (s *Server) readyWarmCounts() map[string]int {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	n := map[string]int{}
	for _, t := range s.cfg.Tenants {
		roots := tenantRootsOf(t)
		for _, p := range t.Pools {
			key := poolKey(t.Name, p.Name)
			for _, rec := range s.sess.warm[key] {
				if s.readyWarm(roots, rec) != nil {
					n[key]++
				}
			}
		}
	}
	return n
}

// claimable is the pools a start may claim from, in the config's order: the one it
// names, or, for a start naming nothing (no pool, workspace, contract or stage), the
// tenant's pools of its base contract. An unknown pool is an error for the client.
func claimable(t config.Tenant, req api.StartRequest) ([]config.Pool, error) {
	if req.Pool != "" {
		for _, p := range t.Pools {
			if p.Name == req.Pool {
				return []config.Pool{p}, nil
			}
		}
		names := make([]string, 0, len(t.Pools))
		for _, p := range t.Pools {
			names = append(names, p.Name)
		}
		return nil, fmt.Errorf("pool: the tenant has no pool %q (its pools: %s)", req.Pool, orNone(names))
	}
	if req.Workspace != "" || req.Contract != "" || req.Stage {
		return nil, nil
	}
	var ps []config.Pool
	for _, p := range t.Pools {
		if p.Base() {
			ps = append(ps, p)
		}
	}
	return ps, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// CheckConfig checks what cfg asks of the server beyond what [config.Load] checks: that
// each tenant's pools fit its quotas. [New] checks it too; `cordon serve --check` runs
// it without the rest of New (which reads the TLS files).
func CheckConfig(cfg *config.Config) error { return checkPoolQuotas(cfg) }

// checkPoolQuotas refuses a config whose pools could never fill: a pool whose
// contract asks more than its tenant's whole quota, or pools whose warm sessions
// together would be charged more memory, pids or CPU than the tenant has.
func checkPoolQuotas(cfg *config.Config) error {
	var errs []error
	for _, t := range cfg.Tenants {
		var sum quota.Request
		for _, p := range t.Pools {
			_, charge, err := quota.Fit(p.Limits, t.Quotas)
			if err != nil {
				errs = append(errs, &config.Error{File: cfg.File, Pos: p.Pos, Msg: fmt.Sprintf("tenant %q: pool %q: %v", t.Name, p.Name, err)})
				continue
			}
			n := float64(p.Size)
			sum.Memory += charge.Memory * int64(p.Size)
			sum.PIDs += charge.PIDs * int64(p.Size)
			sum.CPU += charge.CPU * n
		}
		for _, f := range []struct {
			name      string
			ask, have float64
			unit      string
		}{
			{"memory", float64(sum.Memory) / (1 << 20), float64(t.Quotas.Memory) / (1 << 20), "MiB"},
			{"pids", float64(sum.PIDs), float64(t.Quotas.Pids), ""},
			{"cpu", sum.CPU, t.Quotas.CPU, ""},
		} {
			if f.ask > f.have {
				errs = append(errs, &config.Error{File: cfg.File, Pos: t.Pos, Msg: fmt.Sprintf(
					"tenant %q: its pools' warm sessions ask %.6g%s of quotas.%s together, more than its %.6g%s: the pools could never fill",
					t.Name, f.ask, f.unit, f.name, f.have, f.unit)})
			}
		}
	}
	return errors.Join(errs...)
}

// refillChans is each pool's refill signal (one pending wake-up at most), by poolKey.
func refillChans(cfg *config.Config) map[string]chan struct{} {
	m := map[string]chan struct{}{}
	for _, t := range cfg.Tenants {
		for _, p := range t.Pools {
			m[poolKey(t.Name, p.Name)] = make(chan struct{}, 1)
		}
	}
	return m
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
