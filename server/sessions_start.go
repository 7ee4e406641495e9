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
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Limits of a session start.
const (
	maxWorkspaceName  = 63
	maxTenantSessions = 16              // running at once, per tenant (reserveSession)
	startTimeout      = 2 * time.Minute // the supervisor's start, image pulls included
	retryAfterSeconds = 10
)

// backends are the sandbox backends a start may name ("" for the server's default).
var backends = []string{"", "auto", "bwrap", "docker", "containerd"}

// defaultContract is the contract of a start that names none, until the tenant's base
// contract is served: cordon's built-in default (the workspace writable except .git,
// @system readable, no network, no credentials).
const defaultContract = "version: 1\nname: default\n"

// startSession starts a session in one of the tenant's workspaces, as `cordon session
// start` does, with the tenant's run and audit roots, and answers it (201).
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
	ws := roots.workspace(req.Workspace)
	yml := req.Contract
	if yml == "" {
		yml = defaultContract
	}
	data, err := pinWorkspace([]byte(yml), ws)
	if err == nil {
		err = s.admitContract(roots.t, yml, ws)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	release, err := s.reserveSession(roots.t)
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		writeJSON(w, http.StatusTooManyRequests, api.Error{Error: err.Error(), Quota: "sessions"})
		return
	}
	defer release()
	if _, ok := extendDeadlines(w, startTimeout+execMargin); !ok {
		return
	}
	if err := makeTenantDirs(roots, ws); err != nil {
		s.log.Error("tenant directories", logTenant, id.Tenant, "err", err)
		writeError(w, http.StatusInternalServerError, "the tenant's directories: "+err.Error())
		return
	}
	rec, err := s.launch(r.Context(), roots, req, ws, data)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, apiSession(roots, rec))
}

// validateStart checks what a start names before anything is made of it.
func validateStart(req api.StartRequest) error {
	if !validWorkspaceName(req.Workspace) {
		return fmt.Errorf("workspace: want 1 to %d letters, digits, '-', '_' or '.', not starting with '.'", maxWorkspaceName)
	}
	if !slices.Contains(backends, req.Backend) {
		return fmt.Errorf("backend: want one of bwrap, docker, containerd or auto, not %q", req.Backend)
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

// reserveSession holds one of the tenant's concurrent sessions for a start: refused
// past maxTenantSessions (running, or starting), never queued. release gives it back
// once the start is over; a started session then counts by its supervisor's record.
// (The quota helper replaces the fixed cap with the tenant's quota.)
func (s *Server) reserveSession(tenant config.Tenant) (release func(), err error) {
	name, run := tenant.Name, paths.Root(tenant.RunRoot())
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	running := 0
	for _, si := range wire.List(run.Sessions()) {
		if si.Alive() {
			running++
		}
	}
	if running+s.sess.starting[name] >= maxTenantSessions {
		return nil, fmt.Errorf("the tenant has %d sessions running or starting, its most", maxTenantSessions)
	}
	if s.sess.starting == nil {
		s.sess.starting = map[string]int{}
	}
	s.sess.starting[name]++
	return func() {
		s.sess.mu.Lock()
		defer s.sess.mu.Unlock()
		s.sess.starting[name]--
	}, nil
}

// admitContract refuses a tenant's contract that is not a narrowing of the tenant's
// base contract, or that names a host path outside workspace. For now it refuses
// nothing: the admission check (server/admit) is wired in here.
func (s *Server) admitContract(tenant config.Tenant, yml, workspace string) error {
	_, _, _ = tenant, yml, workspace
	return nil
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

// pinWorkspace checks the contract's YAML and returns it with its workspace set to ws.
// The contract file is not in the workspace (a sandbox could change it there), so a
// workspace relative to the file would be the server's directory: the request's
// workspace is the session's, and a contract naming one of its own is refused.
func pinWorkspace(data []byte, ws string) ([]byte, error) {
	c, err := contract.Parse("contract", data)
	if err != nil {
		return nil, err
	}
	if c.Workspace.Value != "" {
		return nil, fmt.Errorf("contract:%d:%d: workspace: the session's workspace is the request's \"workspace\"; leave it out of the contract", c.Workspace.Pos.Line, c.Workspace.Pos.Col)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("contract: want one mapping")
	}
	top := doc.Content[0]
	top.Content = append(top.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "workspace"},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ws, Style: yaml.DoubleQuotedStyle})
	return yaml.Marshal(&doc)
}

// launch writes the contract to a file of the server's (0600, in the tenant's run
// root, out of every sandbox's reach) and starts the session's supervisor with it, as
// `cordon session start` does: the tenant's run root and audit root, cwd the
// workspace. The start goes on when the client goes away: a supervisor that started
// is recorded, never left unknown.
func (s *Server) launch(ctx context.Context, roots tenantRoots, req api.StartRequest, ws string, data []byte) (sessionRecord, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	file := filepath.Join(roots.contracts(), hex.EncodeToString(rnd[:])+".yaml")
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return sessionRecord{}, err
	}
	_, err = f.Write(data)
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	sess, err := session.Start(ctx, session.StartOptions{Cordon: self, Contract: file, Backend: req.Backend,
		AuditDir: roots.t.AuditRoot(), Dir: ws, Env: roots.env(), Stage: req.Stage})
	if err != nil {
		os.Remove(file)
		return sessionRecord{}, err
	}
	info := sess.Info()
	rec := sessionRecord{ID: info.ID, Workspace: req.Workspace, Backend: info.Backend, Stage: req.Stage,
		Started: info.Started, Contract: file}
	if err := writeRecord(roots, rec); err != nil {
		_ = sess.Stop(ctx) // a session the server cannot list is not left running
		os.Remove(file)
		return sessionRecord{}, fmt.Errorf("recording session %s: %w", rec.ID, err)
	}
	return rec, nil
}
