package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/server/admit"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/server/quota"
	"github.com/cordonhq/cordon/server/workspace"
	"github.com/cordonhq/cordon/session"
)

// Limits of a session start.
const (
	maxWorkspaceName = 63
	startTimeout     = 2 * time.Minute // the supervisor's start, image pulls included
)

// backends are the sandbox backends a start may name ("" for the server's default).
var backends = []string{"", "auto", "bwrap", "docker", "containerd", config.BackendKubernetes}

// leastSession is the smallest charge a session can have.
var leastSession = quota.Request{Memory: 1, PIDs: 1, CPU: 0.001}

// startSession starts a session in one of the tenant's workspaces, as `cordon session
// start` does, with the tenant's run and audit roots, and answers it (201). The
// contract is admitted against the tenant's base (server/admit), its limits fitted to
// the tenant's quotas and written into the contract the supervisor runs, and the
// session charged to the tenant's ledger until it ends (sessions_quota.go).
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	var req api.StartRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if err := validateStart(req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	roots, ok := s.roots(w, id)
	if !ok {
		return
	}
	if _, err := roots.backend(req.Backend); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	pools, err := claimable(roots.t, req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.startClaimed(w, r, roots, req, pools, id) {
		return
	}
	if req.Pool != "" {
		// None of the pool's was ready: a cold start of what the pool would have given.
		p := pools[0]
		req.Contract, req.Stage = string(p.YAML), p.Stage
		if req.Backend == "" {
			req.Backend = p.Backend
		}
	}
	if req.Workspace == "" {
		req.Workspace = "ws-" + randomHex(8)
	}
	// A tenant with no room for the least session (at its sessions or audit quota) is
	// refused before anything is made; the whole charge is known, and reserved, once
	// the contract is compiled.
	if release, err := s.quota.Reserve(roots.t.Name, leastSession); err != nil {
		s.refuse(w, roots, err)
		return
	} else {
		release()
	}
	if _, ok := extendDeadlines(w, startTimeout+execMargin); !ok {
		return
	}
	s.startCold(w, r, id, roots, req)
}

// startCold is a start that claims no warm session: the workspace locked and made (or
// checked), the contract admitted and charged, the supervisor launched, and the
// workspace cloned into when the start names a git source.
func (s *Server) startCold(w http.ResponseWriter, r *http.Request, id auth.Identity, roots tenantRoots, req api.StartRequest) {
	// One start per workspace at a time, and none beside a running session: a sandbox
	// in the workspace could swap a path the contract names for a link between the
	// admission and the supervisor's compile.
	unlock, err := s.lockWorkspace(roots, req.Workspace)
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	defer unlock()
	ws := roots.workspace(req.Workspace)
	created, err := s.ensureWorkspace(roots, req.Workspace)
	if err != nil {
		s.writeWorkspaceError(w, id, err)
		return
	}
	started := false
	defer func() {
		if !started && created {
			os.Remove(ws) // made for this start, still empty: a refused start leaves nothing
		}
	}()
	if req.Git != nil {
		if empty, err := isEmpty(ws); err != nil || !empty {
			writeError(w, http.StatusConflict, "workspace "+req.Workspace+" is not empty: a git clone needs a new or empty one")
			return
		}
	}
	yml := []byte(req.Contract)
	if req.Contract == "" {
		yml = roots.t.Base.YAML()
	}
	adm, ok := s.admit(w, roots, yml, ws)
	if !ok {
		return
	}
	release, err := s.quota.Reserve(roots.t.Name, adm.charge)
	if err != nil {
		s.refuse(w, roots, err)
		return
	}
	rec, err := s.launch(r.Context(), roots, req, ws, adm, "")
	if err != nil {
		release()
		s.log.Error("starting a session", logTenant, roots.t.Name, logWorkspace, req.Workspace, logErr, err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	started = true
	s.hold(roots.t, rec, release)
	s.log.Info("session started", logTenant, roots.t.Name, logSession, rec.ID, logWorkspace, req.Workspace,
		logBackend, rec.Backend, logCredential, id.Credential)
	if req.Git != nil && !s.fillFromGit(w, r, roots, rec, *req.Git, created) {
		return
	}
	writeJSON(w, http.StatusCreated, apiSession(roots, rec))
}

// startClaimed answers a start that may take a warm session of one of pools (claimable)
// with the first ready, and counts the claim on its pool; false when there are no
// pools, or none was ready (a cold start then, counted as a miss of the first pool).
// Past the tenant's audit or disk quota, or at its workspaces quota (the claimed
// workspace is the tenant's), it answers 429, as a cold start would.
func (s *Server) startClaimed(w http.ResponseWriter, r *http.Request, roots tenantRoots, req api.StartRequest, pools []config.Pool, id auth.Identity) bool {
	if len(pools) == 0 {
		return false
	}
	// A claim is a new session of the tenant: past its audit or disk quota it is
	// refused as a cold start would be (its charges it has had since its warm start).
	if err := s.quota.Room(roots.t.Name); err != nil {
		s.refuse(w, roots, err)
		return true
	}
	// The claimed session's workspace becomes the tenant's for good: it counts
	// against quotas.workspaces as an upload's or a cold start's new one does, the
	// count and the claim one step (s.wsMu) so two cannot both take the last one.
	s.wsMu.Lock()
	if err := s.workspaceRoom(roots); err != nil {
		s.wsMu.Unlock()
		var e *quota.Exceeded
		if errors.As(err, &e) {
			s.refuse(w, roots, err)
		} else {
			s.internal(w, id, "counting the tenant's workspaces", err)
		}
		return true
	}
	var rec sessionRecord
	var ok bool
	for _, p := range pools {
		if rec, ok = s.claim(roots, p, req.Backend); ok {
			break
		}
	}
	s.wsMu.Unlock()
	pool := pools[0].Name
	if ok {
		pool = rec.Pool
	}
	s.metrics.poolClaim(roots.t.Name, pool, ok)
	if !ok {
		return false
	}
	s.log.Info("session claimed from a warm pool", logTenant, roots.t.Name, logPool, rec.Pool, logSession, rec.ID, logCredential, id.Credential)
	if req.Git != nil && !s.fillFromGit(w, r, roots, rec, *req.Git, false) {
		return true
	}
	writeJSON(w, http.StatusCreated, apiSession(roots, rec))
	return true
}

// admit checks a start's contract against the tenant's base and quotas and returns the
// contract the supervisor is to run (its workspace and every limit written in) and
// what the session is charged. On a refusal it has answered: 400 for a contract that
// does not parse or compile or asks more than the whole quota, 403 for one wider than
// the base or naming a host path outside the workspace.
func (s *Server) admit(w http.ResponseWriter, roots tenantRoots, yml []byte, ws string) (admitted, bool) {
	adm, err := s.admitContract(roots, yml, ws)
	switch {
	case err == nil:
		return adm, true
	case errors.Is(err, admit.ErrInvalid), errors.Is(err, quota.ErrTooLarge):
		s.log.Info("session refused: contract", logTenant, roots.t.Name, logStatus, http.StatusBadRequest, logReason, err.Error())
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, admit.ErrRefused):
		s.log.Info("session refused: contract", logTenant, roots.t.Name, logStatus, http.StatusForbidden, logReason, err.Error())
		writeError(w, http.StatusForbidden, err.Error())
	default:
		s.log.Error("admitting a contract", logTenant, roots.t.Name, logErr, err)
		writeError(w, http.StatusInternalServerError, "the contract could not be checked against the tenant's base and quotas")
	}
	return admitted{}, false
}

// admitted is a contract admitted for a session: what the supervisor runs, what the
// session is charged, and its per-command timeout, the longest an exec may ask for.
type admitted struct {
	data    []byte
	charge  quota.Request
	timeout time.Duration
}

// admitContract is admit's check: admit.Check, quota.Fit, pinContract.
func (s *Server) admitContract(roots tenantRoots, yml []byte, ws string) (admitted, error) {
	compiled, err := admit.Check(roots.t.Base, yml, ws, roots.t.Workspaces())
	if err != nil {
		return admitted{}, err
	}
	lim, charge, err := quota.Fit(compiled.Plan.Limits, roots.t.Quotas)
	if err != nil {
		return admitted{}, err
	}
	data, err := pinContract(yml, ws, lim)
	if err != nil {
		return admitted{}, fmt.Errorf("%w: %w", admit.ErrInvalid, err)
	}
	return admitted{data: data, charge: charge, timeout: time.Duration(compiled.Plan.Timeout)}, nil
}

// validateStart checks what a start names before anything is made of it.
func validateStart(req api.StartRequest) error {
	if req.Workspace != "" && !validWorkspaceName(req.Workspace) {
		return fmt.Errorf("workspace: want 1 to %d letters, digits, '-', '_' or '.', not starting with '.'", maxWorkspaceName)
	}
	if !slices.Contains(backends, req.Backend) {
		return fmt.Errorf("backend: want one of bwrap, docker, containerd, kubernetes or auto, not %q", req.Backend)
	}
	if req.Pool != "" && (req.Workspace != "" || req.Contract != "" || req.Stage) {
		return errors.New("pool: a start from a pool names no workspace, contract or stage: the pool's contract and stage are the session's")
	}
	if req.Git != nil {
		return workspace.CheckGit(req.Git.URL, req.Git.Commit)
	}
	return nil
}

func validWorkspaceName(n string) bool {
	if n == "" || len(n) > maxWorkspaceName || n[0] == '.' {
		return false
	}
	for _, c := range []byte(n) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// makeTenantDirs makes (or checks) the tenant's run, audit and workspaces roots, its
// server records' directories and the workspace ws, a directory of the workspaces
// root. Each root is made and checked all the way from / ([paths.MakeDir]): none is
// anywhere a sandbox can write. The workspace is a sandbox's to write, so only its own
// entry is checked: a directory, no link, in the server's workspaces root.
func makeTenantDirs(roots tenantRoots, ws string) error {
	for _, d := range []string{roots.run.String(), roots.run.Sessions(), roots.t.AuditRoot(), roots.t.Workspaces(), roots.serve(), roots.contracts()} {
		if err := paths.MakeDir(d, paths.Owner()); err != nil {
			return err
		}
	}
	if err := os.Mkdir(ws, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(ws)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: the workspace %s is not a directory", paths.ErrUnsafe, filepath.Base(ws))
	}
	return nil
}

// pinContract returns the contract's YAML with its workspace set to ws and its limits
// to lim: the contract the supervisor compiles is the one admitted, held to what the
// session is charged. The file is not in the workspace (a sandbox could change it
// there), so a workspace relative to the file would be the server's directory; the
// admission refused any workspace but ws.
func pinContract(data []byte, ws string, lim contract.LimitsPlan) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("contract: want one mapping")
	}
	top := doc.Content[0]
	setKey(top, "workspace", scalar(ws))
	limits := mapping(top, "limits")
	setKey(limits, "memory", scalar(strconv.FormatInt(lim.Memory, 10)+"B"))
	setKey(limits, "pids", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(lim.Pids, 10)})
	setKey(limits, "cpu", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(lim.CPU, 'f', -1, 64)})
	return yaml.Marshal(&doc)
}

func scalar(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Style: yaml.DoubleQuotedStyle}
}

// setKey sets key of mapping m to v, replacing its value when it is there.
func setKey(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

// mapping is the mapping under key of m, made (or made a mapping) when it is not one.
func mapping(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.MappingNode {
			return m.Content[i+1]
		}
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	setKey(m, key, n)
	return n
}

// launch writes the contract to a file of the server's (0600, in the tenant's run
// root, out of every sandbox's reach) and starts the session's supervisor with it, as
// `cordon session start` does: the tenant's run root and audit root, cwd the
// workspace. The start goes on when the client goes away: a supervisor that started
// is recorded, never left unknown.
func (s *Server) launch(ctx context.Context, roots tenantRoots, req api.StartRequest, ws string, adm admitted, pool string) (sessionRecord, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	file := filepath.Join(roots.contracts(), hex.EncodeToString(rnd[:])+".yaml")
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return sessionRecord{}, err
	}
	_, err = f.Write(adm.data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
		return sessionRecord{}, err
	}
	self, err := os.Executable()
	if err != nil {
		os.Remove(file)
		return sessionRecord{}, err
	}
	backend, err := roots.backend(req.Backend)
	if err != nil {
		os.Remove(file)
		return sessionRecord{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	sess, err := session.Start(ctx, session.StartOptions{Cordon: self, Contract: file, Backend: backend,
		AuditDir: roots.t.AuditRoot(), Dir: ws, Env: roots.env(), Stage: req.Stage})
	if err != nil {
		os.Remove(file)
		return sessionRecord{}, err
	}
	info := sess.Info()
	rec := sessionRecord{ID: info.ID, Workspace: req.Workspace, Backend: info.Backend, Stage: req.Stage,
		Started: info.Started, Contract: file, Charge: adm.charge, Warm: pool != "", Claimed: pool != "", Pool: pool,
		TimeoutMS: adm.timeout.Milliseconds()}
	if err := writeRecord(roots, rec); err != nil {
		_ = sess.Stop(ctx) // a session the server cannot list is not left running
		os.Remove(file)
		return sessionRecord{}, fmt.Errorf("recording session %s: %w", rec.ID, err)
	}
	return rec, nil
}
