package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/kubernetes"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/server/quota"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// A session served by the server is what `cordon session start` makes: a detached
// supervisor publishing its socket and record in the tenant's run root. The server
// keeps beside them, in RUNROOT/serve/, its own record of each session it started (the
// workspace's name, whether it was stopped) and the contract file it started it with,
// so that a session is still listed, with its state, after it stopped and after the
// daemon restarted.
const (
	serveDir          = "serve"     // under the tenant's run root
	contractsDir      = "contracts" // under serveDir
	maxStoppedRecords = 256         // a tenant's stopped sessions listed; the oldest are forgotten
	stateRunning      = "running"
	stateStopped      = "stopped"
	stateDead         = "dead" // its supervisor is gone without a stop
)

// sessions is the server's state about sessions that is not on disk: the workspaces
// being started in, the quota charges of the live sessions (sessions_quota.go), and
// the warm pools' unclaimed sessions (pool.go).
type sessions struct {
	mu       sync.Mutex
	starting map[string]bool // "tenant/workspace" of the starts in flight
	// warming is "tenant/workspace" of the warm sessions being started: their
	// workspaces are the server's before their records say so (pool.go).
	warming map[string]bool
	holds   map[string]*hold // by "tenant/id": the live sessions' charges
	// warm is, by pool (poolKey), the warm sessions this server started and no one claimed,
	// oldest first: what a claim takes from and the pool counts, without reading
	// every record.
	warm map[string][]sessionRecord
}

// sessionRecord is RUNROOT/serve/ID.json.
type sessionRecord struct {
	ID        string    `json:"id"`
	Workspace string    `json:"workspace"` // its name in the tenant's workspace root
	Backend   string    `json:"backend"`
	Stage     bool      `json:"stage"`
	Started   time.Time `json:"started"`
	Contract  string    `json:"contract"` // the contract file the server wrote, removed at stop
	Stopped   bool      `json:"stopped"`
	// Charge is what the session is charged to the tenant's quotas, its contract's
	// limits: charged again when a restarted server adopts it.
	Charge quota.Request `json:"charge"`
	// TimeoutMS is the contract's per-command timeout: an exec may ask for a shorter
	// one, never a longer (0 in a record of an older server: none may be asked).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Warm marks a session of the tenant's warm pool not claimed yet: no one's, not
	// listed, its id 404 (pool.go). Claimed marks one that came from the pool, Pool
	// names the pool.
	Warm    bool   `json:"warm,omitempty"`
	Claimed bool   `json:"claimed,omitempty"`
	Pool    string `json:"pool,omitempty"`
	// ClaimedAt is when a warm session was claimed: its wall time counts from then.
	ClaimedAt time.Time `json:"claimed_at,omitempty"`
	// Ended says why a session the server found dead ended, once it collected it
	// (sessions_dead.go): its state is dead from then on, whatever its supervisor.
	Ended string `json:"ended,omitempty"`
}

// wallFrom is when the session's wall time started: its claim for one from the warm
// pool, its start otherwise.
func (rec sessionRecord) wallFrom() time.Time {
	if !rec.ClaimedAt.IsZero() {
		return rec.ClaimedAt
	}
	return rec.Started
}

// tenantRoots are the places of one tenant the sessions API uses.
type tenantRoots struct {
	t   config.Tenant
	run paths.Root
}

func (r tenantRoots) serve() string             { return filepath.Join(r.run.String(), serveDir) }
func (r tenantRoots) record(id string) string   { return filepath.Join(r.serve(), id+".json") }
func (r tenantRoots) contracts() string         { return filepath.Join(r.serve(), contractsDir) }
func (r tenantRoots) workspace(n string) string { return filepath.Join(r.t.Workspaces(), n) }

// events is the audit log of session (run) id.
func (r tenantRoots) events(id string) string {
	return filepath.Join(r.t.AuditRoot(), id, audit.EventsFile)
}

// env is the environment the tenant's cordon processes run with: the server's, with
// the tenant's run root and CORDON_GATES=ask.
func (r tenantRoots) env() []string {
	// Gates are asked of a person: a served session's approvers answer through the
	// API (an approver's gate approve), whatever CI says of the server's own
	// environment (gate.ModeFromEnv denies under CI=true, where no one could answer).
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(placementEnv, name)
	})
	env = append(env, paths.RunRootEnv+"="+r.run.String(), "CORDON_GATES=ask")
	if k := r.t.Placement.Kubernetes; k != nil {
		env = append(env, kubernetes.EnvConfig+"="+k.Config, kubernetes.EnvKubeconfig+"="+k.Kubeconfig, kubernetes.EnvTenant+"="+r.t.Name)
	}
	return env
}

// placementEnv are the variables that place a supervisor's sandbox on a cluster: only
// the tenant's placement sets them, never the server's own environment.
var placementEnv = []string{kubernetes.EnvConfig, kubernetes.EnvKubeconfig, kubernetes.EnvTenant}

// backend is the backend a session of the tenant runs on when the client (or a pool)
// asks for requested: a tenant placed on a cluster runs every session there, and no
// other tenant can ask for a cluster.
func (r tenantRoots) backend(requested string) (string, error) {
	placed := r.t.Placement.Backend()
	switch {
	case placed != "" && (requested == "" || requested == "auto" || requested == placed):
		return placed, nil
	case placed != "":
		return "", fmt.Errorf("backend: the tenant's sessions are placed on %s, not %q", placed, requested)
	case requested == config.BackendKubernetes:
		return "", errors.New("backend: kubernetes: the tenant's sessions are not placed on a cluster")
	}
	return requested, nil
}

// tenantRootsOf is tenant t's places.
func tenantRootsOf(t config.Tenant) tenantRoots {
	return tenantRoots{t: t, run: paths.Root(t.RunRoot())}
}

// roots finds the caller's tenant. Authentication made the identity from the config,
// so it is always there; a missing one is a server bug, answered 500.
func (s *Server) roots(w http.ResponseWriter, id auth.Identity) (tenantRoots, bool) {
	for _, t := range s.cfg.Tenants {
		if t.Name == id.Tenant {
			return tenantRootsOf(t), true
		}
	}
	writeError(w, http.StatusInternalServerError, "no tenant "+id.Tenant)
	return tenantRoots{}, false
}

// validSessionID reports whether id may name a session: 1 to 64 of [A-Za-z0-9-]. Any
// other id is answered 404 without being joined to a path.
func validSessionID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// notFound is the one answer for a session id the caller's tenant does not have:
// malformed, never started, or another tenant's.
func notFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "no such session")
}

// lookup finds the session the request's {id} names in the caller's tenant, or
// answers 404 (or 500 when its records cannot be trusted).
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, id auth.Identity) (tenantRoots, sessionRecord, bool) {
	roots, ok := s.roots(w, id)
	if !ok {
		return roots, sessionRecord{}, false
	}
	sid := r.PathValue("id")
	if !validSessionID(sid) {
		notFound(w)
		return roots, sessionRecord{}, false
	}
	rec, err := readRecord(roots, sid)
	switch {
	case errors.Is(err, os.ErrNotExist), err == nil && rec.Warm: // a warm session is no one's yet
		notFound(w)
		return roots, rec, false
	case err != nil:
		s.log.Error("session record", logTenant, id.Tenant, logSession, sid, logErr, err)
		writeError(w, http.StatusInternalServerError, "the session's record cannot be read")
		return roots, rec, false
	}
	return roots, rec, true
}

// readRecord reads session id's record: a regular file of this user in a directory
// chain no one else can change.
func readRecord(roots tenantRoots, id string) (sessionRecord, error) {
	var rec sessionRecord
	if err := paths.CheckDir(roots.serve(), paths.Owner()); err != nil {
		return rec, err
	}
	data, err := paths.ReadRecord(roots.record(id), paths.Owner())
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, err
	}
	if rec.ID != id {
		return rec, fmt.Errorf("the record of session %s names session %q", id, rec.ID)
	}
	return rec, nil
}

func writeRecord(roots tenantRoots, rec sessionRecord) error {
	data, _ := json.Marshal(rec)
	return atomicfile.Write(roots.record(rec.ID), data, 0o600)
}

// state is the session's state now: stopped through the API, running while its
// supervisor lives, dead otherwise.
func state(roots tenantRoots, rec sessionRecord) string {
	if rec.Stopped {
		return stateStopped
	}
	if rec.Ended != "" {
		return stateDead
	}
	if paths.CheckDir(roots.run.Sessions(), paths.Owner()) != nil {
		return stateDead
	}
	if si, err := wire.Read(roots.run.Sessions(), rec.ID); err == nil && si.Alive() {
		return stateRunning
	}
	return stateDead
}

func apiSession(roots tenantRoots, rec sessionRecord) api.Session {
	return api.Session{ID: rec.ID, State: state(roots, rec), Started: rec.Started, Backend: rec.Backend,
		Workspace: rec.Workspace, Stage: rec.Stage, Warm: rec.Claimed, Pool: rec.Pool, Ended: rec.Ended}
}

// records lists the tenant's session records, oldest first.
func records(roots tenantRoots) []sessionRecord {
	if paths.CheckDir(roots.serve(), paths.Owner()) != nil {
		return nil
	}
	matches, _ := filepath.Glob(filepath.Join(roots.serve(), "*.json"))
	var out []sessionRecord
	for _, m := range matches {
		id := strings.TrimSuffix(filepath.Base(m), ".json")
		if !validSessionID(id) {
			continue
		}
		if rec, err := readRecord(roots, id); err == nil {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b sessionRecord) int { return a.Started.Compare(b.Started) })
	return out
}

func (s *Server) listSessions(w http.ResponseWriter, _ *http.Request, id auth.Identity) {
	roots, ok := s.roots(w, id)
	if !ok {
		return
	}
	list := api.SessionList{Sessions: []api.Session{}}
	for _, rec := range records(roots) {
		if !rec.Warm {
			list.Sessions = append(list.Sessions, apiSession(roots, rec))
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if roots, rec, ok := s.lookup(w, r, id); ok {
		writeJSON(w, http.StatusOK, apiSession(roots, rec))
	}
}

// open finds the caller's session {id} and opens it, or answers: 404 for none, 409
// for one that is not running.
func (s *Server) open(w http.ResponseWriter, r *http.Request, id auth.Identity) (*session.Session, bool) {
	sess, _, ok := s.openRecord(w, r, id)
	return sess, ok
}

// openRecord is open, with the session's record.
func (s *Server) openRecord(w http.ResponseWriter, r *http.Request, id auth.Identity) (*session.Session, sessionRecord, bool) {
	roots, rec, ok := s.lookup(w, r, id)
	if !ok {
		return nil, rec, false
	}
	if st := state(roots, rec); st != stateRunning {
		writeError(w, http.StatusConflict, "session "+rec.ID+" is "+st)
		return nil, rec, false
	}
	sess, err := session.OpenWith(roots.env(), rec.ID)
	if err != nil {
		sessionError(w, err)
		return nil, rec, false
	}
	return sess, rec, true
}

// sessionError answers a failure of the session client: 409 when the session is
// gone, 400 for a request the supervisor refused as malformed, 429 (quota disk) when
// it failed on the tenant's full disk, 500 otherwise.
func sessionError(w http.ResponseWriter, err error) {
	var se *session.Error
	switch {
	case errors.Is(err, session.ErrNoSession):
		writeError(w, http.StatusConflict, "the session is not running")
	case errors.As(err, &se) && se.Code == 2:
		writeError(w, http.StatusBadRequest, se.Msg)
	case errors.As(err, &se) && se.NoSpace:
		writeQuotaError(w, &quota.Exceeded{Quota: quota.Disk, RetryAfter: time.Minute,
			Detail: "the tenant's disk is full: delete workspaces, runs or checkpoints (" + se.Msg + ")"})
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func (s *Server) sweepSession(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	sess, ok := s.open(w, r, id)
	if !ok {
		return
	}
	turn, err := sess.Sweep(r.Context())
	if err != nil {
		sessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Sweep{Removed: turn.Removed, Changed: orEmpty(turn.Changed), More: turn.More})
}

func (s *Server) checkpointSession(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	var req api.CheckpointRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	sess, ok := s.open(w, r, id)
	if !ok {
		return
	}
	cp, problems, err := sess.Checkpoint(r.Context(), req.Name)
	if err != nil {
		sessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.CheckpointResponse{Checkpoint: cp, Problems: orEmpty(problems)})
}

func (s *Server) rollbackSession(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	var req api.RollbackRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if req.To == "" {
		writeError(w, http.StatusBadRequest, "rollback: name the checkpoint in \"to\"")
		return
	}
	sess, ok := s.open(w, r, id)
	if !ok {
		return
	}
	cp, changed, problems, err := sess.Rollback(r.Context(), req.To)
	if err != nil {
		sessionError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RollbackResponse{Checkpoint: cp, Changed: orEmpty(changed), Problems: orEmpty(problems)})
}

// stopSession stops the session (a running one: its commands end, credentials are
// revoked, the log is sealed) and marks it stopped; it stays listed. Stopping a
// stopped or dead session marks it stopped and is no error. The stop goes on when the
// client goes away: a teardown is not left half done.
func (s *Server) stopSession(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	roots, rec, ok := s.lookup(w, r, id)
	if !ok {
		return
	}
	switch state(roots, rec) {
	case stateDead:
		// Dead and not collected yet: its log is sealed and its leftovers removed
		// before it is marked stopped (which the reaper would then pass over).
		if rec.Ended == "" && !rec.Stopped {
			if _, ok := extendDeadlines(w, gcTimeout+execMargin); !ok {
				return
			}
			s.collectDead(r.Context(), roots, rec)
			if now, err := readRecord(roots, rec.ID); err == nil {
				rec = now
			}
		}
	case stateRunning:
		if _, ok := extendDeadlines(w, stopTimeout+execMargin); !ok {
			return
		}
	}
	var se *stopError
	switch err := s.stop(r.Context(), roots, rec); {
	case errors.As(err, &se):
		sessionError(w, se.err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rec.Stopped = true
	s.log.Info("session stop asked", logTenant, roots.t.Name, logSession, rec.ID, logCredential, id.Credential)
	writeJSON(w, http.StatusOK, apiSession(roots, rec))
}

// stopError is a stop the session refused or failed.
type stopError struct{ err error }

func (e *stopError) Error() string { return "stopping the session: " + e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// stop stops the session of rec when it runs, releases its charge and records it
// stopped. The stop goes on when ctx is cancelled: a teardown is not left half done.
func (s *Server) stop(ctx context.Context, roots tenantRoots, rec sessionRecord) error {
	if state(roots, rec) == stateRunning {
		sess, err := session.OpenWith(roots.env(), rec.ID)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			err = sess.Stop(ctx)
			cancel()
		}
		if err != nil && !errors.Is(err, session.ErrNoSession) {
			return &stopError{err}
		}
	}
	s.unhold(roots.t.Name, rec.ID)
	if !rec.Stopped {
		rec.Stopped = true
		if err := writeRecord(roots, rec); err != nil {
			return fmt.Errorf("recording the stop: %w", err)
		}
		removeContract(roots, rec)
		forgetStopped(roots)
		s.log.Info("session stopped", logTenant, roots.t.Name, logSession, rec.ID)
	}
	return nil
}

// stopTimeout bounds a session's teardown asked for over the API.
const stopTimeout = 2 * time.Minute

// removeContract removes the contract file the server wrote for rec, when it is one
// of the tenant's contracts directory.
func removeContract(roots tenantRoots, rec sessionRecord) {
	if rec.Contract != "" && filepath.Dir(rec.Contract) == roots.contracts() {
		os.Remove(rec.Contract)
	}
}

// forgetStopped removes the oldest stopped (or collected dead) sessions' records past
// maxStoppedRecords. A warm one's is kept (pool.go's stopLeftWarm: its workspace may
// hold a claim a crash lost, and forgotten it would become a workspace of the tenant's).
func forgetStopped(roots tenantRoots) {
	var stopped []sessionRecord
	for _, rec := range records(roots) {
		if !rec.Warm && (rec.Stopped || rec.Ended != "") {
			stopped = append(stopped, rec)
		}
	}
	for len(stopped) > maxStoppedRecords {
		os.Remove(roots.record(stopped[0].ID))
		stopped = stopped[1:]
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
