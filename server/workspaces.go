package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/quota"
	"github.com/cordonhq/cordon/server/workspace"
)

// Bounds of a workspace's upload and download. An upload's body may hold, besides
// the files' data the tenant's quotas.upload_bytes bound, entryOverhead bytes of tar
// headers (long names, PAX records, padding) per entry and a MiB more.
const (
	transferTimeout = 15 * time.Minute
	entryOverhead   = 8 << 10
	workspacesQuota = "workspaces" // api.Error.Quota past quotas.workspaces
)

func (s *Server) workspaceHandlers() map[string]handler {
	return map[string]handler{
		"GET /v1/workspaces":           s.listWorkspaces,
		"PUT /v1/workspaces/{name}":    s.putWorkspace,
		"GET /v1/workspaces/{name}":    s.getWorkspace,
		"DELETE /v1/workspaces/{name}": s.deleteWorkspace,
		"GET /v1/sessions/{id}/patch":  s.sessionPatch,
	}
}

// tenantWorkspaces are the tenant's workspaces (a warm pool's unclaimed ones are the
// server's, not listed or counted), with the running session in each.
func (s *Server) tenantWorkspaces(roots tenantRoots) ([]api.Workspace, error) {
	entries, err := os.ReadDir(roots.t.Workspaces())
	if errors.Is(err, fs.ErrNotExist) {
		return []api.Workspace{}, nil
	}
	if err != nil {
		return nil, err
	}
	running, warm := map[string]string{}, map[string]bool{}
	for _, rec := range records(roots) {
		switch {
		case rec.Warm:
			warm[rec.Workspace] = true
		case state(roots, rec) == stateRunning:
			running[rec.Workspace] = rec.ID
		}
	}
	out := []api.Workspace{}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || !validWorkspaceName(n) || warm[n] || strings.HasPrefix(n, warmPrefix) && s.poolsNow(roots, n) {
			continue
		}
		out = append(out, api.Workspace{Name: n, Session: running[n]})
	}
	return out, nil
}

// poolsNow reports whether the workspace name is a warm session's, being started or
// recorded, checked under the sessions lock: a warm start clears its warming mark
// (under that lock) only after its record says warm, so one or the other holds. The
// records read above, before a start recorded its session, may not show it, and its
// mark may be gone by the time the entry is looked at.
func (s *Server) poolsNow(roots tenantRoots, name string) bool {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	return s.sess.warming[roots.t.Name+"/"+name] || s.isWarm(roots, name)
}

func (s *Server) listWorkspaces(w http.ResponseWriter, _ *http.Request, id auth.Identity) {
	roots, ok := s.roots(w, id)
	if !ok {
		return
	}
	list, err := s.tenantWorkspaces(roots)
	if err != nil {
		s.internal(w, id, "listing workspaces", err)
		return
	}
	writeJSON(w, http.StatusOK, api.WorkspaceList{Workspaces: list, Quota: roots.t.Quotas.Workspaces})
}

// ensureWorkspace makes the tenant's workspace name when it is missing, within its
// quotas.workspaces, and checks it ([makeTenantDirs]); created says it was made now.
// The count and the make are one step: two starts cannot both take the last one.
func (s *Server) ensureWorkspace(roots tenantRoots, name string) (created bool, err error) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	ws := roots.workspace(name)
	if _, err := os.Lstat(ws); err == nil {
		return false, makeTenantDirs(roots, ws)
	}
	if strings.HasPrefix(name, warmPrefix) {
		return false, errWarmName // the pools' (a claimed one's stays the tenant's, above)
	}
	if err := s.workspaceRoom(roots); err != nil {
		return false, err
	}
	return true, makeTenantDirs(roots, ws)
}

// workspaceRoom is nil when the tenant has room for one more workspace within its
// quotas.workspaces, a *quota.Exceeded (workspaces) when not. s.wsMu must be held
// from the count until the workspace is the tenant's (made, or a warm one claimed).
func (s *Server) workspaceRoom(roots tenantRoots) error {
	have, err := s.tenantWorkspaces(roots)
	if err != nil {
		return err
	}
	if max := roots.t.Quotas.Workspaces; len(have) >= max {
		return &quota.Exceeded{Quota: workspacesQuota, RetryAfter: time.Minute,
			Detail: fmt.Sprintf("the tenant has %d workspaces of %d; delete one (DELETE /v1/workspaces/NAME)", len(have), max)}
	}
	return nil
}

// errWarmName refuses a new workspace of the tenant's named as the warm pools' are:
// those names are the server's, so a warm-* directory no record names is one a
// server that died left mid-start, removed at the next start (removeOrphanWarm).
var errWarmName = fmt.Errorf("workspace: a new workspace's name may not start with %q: those are the warm pools'", warmPrefix)

// writeWorkspaceError answers an error of ensureWorkspace: 400 for a name the
// server keeps, 429 past the quota, 500 otherwise.
func (s *Server) writeWorkspaceError(w http.ResponseWriter, id auth.Identity, err error) {
	if errors.Is(err, errWarmName) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var e *quota.Exceeded
	if errors.As(err, &e) {
		s.metrics.refused(id.Tenant, e.Quota)
		writeQuotaError(w, e)
		return
	}
	s.internal(w, id, "the tenant's workspace", err)
}

// workspaceName is the request's {name}, or a 404 answered for one that cannot name
// a workspace of the tenant (never joined to a path) and for a warm session's
// workspace not claimed yet (the server's, not the tenant's; claimed, it is the
// tenant's like any other).
func (s *Server) workspaceName(w http.ResponseWriter, r *http.Request, roots tenantRoots) (string, bool) {
	n := r.PathValue("name")
	if !validWorkspaceName(n) || strings.HasPrefix(n, warmPrefix) && (s.isWarming(roots, n) || s.isWarm(roots, n)) {
		writeError(w, http.StatusNotFound, "no such workspace")
		return "", false
	}
	return n, true
}

// removeOrphanWarm removes, at the server's start, the empty warm-* workspaces no
// record names: a server that died while it started a warm session made the
// directory and never recorded the session (stopUnrecorded stops it). No tenant names
// a new workspace so (errWarmName); left, it would be listed as the tenant's and
// counted against its workspaces quota. One that is not empty is kept: a claimed
// session's workspace is the tenant's for good, also once its record is forgotten.
func (s *Server) removeOrphanWarm(roots tenantRoots) {
	entries, err := os.ReadDir(roots.t.Workspaces())
	if err != nil {
		return
	}
	named := map[string]bool{}
	for _, rec := range records(roots) {
		named[rec.Workspace] = true
	}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || !strings.HasPrefix(n, warmPrefix) || !validWorkspaceName(n) || named[n] {
			continue
		}
		if empty, err := isEmpty(roots.workspace(n)); err != nil || !empty {
			continue
		}
		if err := os.Remove(roots.workspace(n)); err != nil {
			s.log.Error("warm pool: removing a workspace no session is recorded in", logTenant, roots.t.Name, logWorkspace, n, logErr, err)
			continue
		}
		s.log.Info("warm pool: removed a workspace a previous server left unrecorded", logTenant, roots.t.Name, logWorkspace, n)
	}
}

// isEmpty reports whether the directory ws holds nothing.
func isEmpty(ws string) (bool, error) {
	f, err := os.Open(ws)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	switch {
	case len(names) > 0:
		return false, nil
	case errors.Is(err, io.EOF):
		return true, nil
	}
	return false, err
}

// putWorkspace unpacks the request's tar into the workspace {name}, made for it or
// empty and with no session in it (server/workspace checks every entry). A refused
// archive leaves the workspace empty (or gone, when it was made for it).
func (s *Server) putWorkspace(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	roots, ok := s.roots(w, id)
	if !ok {
		return
	}
	name, ok := s.workspaceName(w, r, roots)
	if !ok {
		return
	}
	lim := roots.t.Quotas.Upload
	bound := lim.Bytes + int64(lim.Entries)*entryOverhead + 1<<20
	if r.ContentLength > bound {
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the tenant's uploads hold at most %d bytes of files", lim.Bytes))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != api.Tar {
		writeError(w, http.StatusUnsupportedMediaType, "want Content-Type: "+api.Tar)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, bound)
	if _, ok := extendDeadlines(w, transferTimeout); !ok {
		return
	}
	unlock, err := s.lockWorkspace(roots, name)
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	defer unlock()
	created, err := s.ensureWorkspace(roots, name)
	if err != nil {
		s.writeWorkspaceError(w, id, err)
		return
	}
	ws := roots.workspace(name)
	if empty, err := isEmpty(ws); err != nil || !empty {
		writeError(w, http.StatusConflict, "workspace "+name+" is not empty: upload into a new or empty one")
		return
	}
	st, err := workspace.Unpack(r.Body, ws, workspace.Limits{Bytes: lim.Bytes, Entries: lim.Entries})
	if err != nil {
		s.clearWorkspace(roots, ws, created)
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig), errors.Is(err, workspace.ErrTooLarge):
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		case errors.Is(err, workspace.ErrRefused), errors.Is(err, workspace.ErrMalformed):
			writeError(w, http.StatusBadRequest, err.Error())
		case errors.Is(err, workspace.ErrNoSpace):
			s.metrics.refused(roots.t.Name, quota.Disk)
			writeQuotaError(w, &quota.Exceeded{Quota: quota.Disk, RetryAfter: time.Minute,
				Detail: "the tenant's disk is full: delete workspaces or runs (" + err.Error() + ")"})
		default:
			s.internal(w, id, "unpacking a workspace", err)
		}
		return
	}
	writeJSON(w, http.StatusCreated, api.Workspace{Name: name, Entries: st.Entries, Bytes: st.Bytes})
}

// clearWorkspace removes what a refused upload made: the workspace itself when it
// was made for it, else its content (linux.RemoveTree follows no link, and holds few
// descriptors however deep a sandbox made the tree).
func (s *Server) clearWorkspace(roots tenantRoots, ws string, created bool) {
	if err := linux.RemoveTree(ws); err != nil {
		s.log.Error("removing a refused upload", logTenant, roots.t.Name, "workspace", filepath.Base(ws), "err", err)
		return
	}
	if !created {
		if err := os.Mkdir(ws, 0o755); err != nil {
			s.log.Error("emptying a workspace", logTenant, roots.t.Name, "workspace", filepath.Base(ws), "err", err)
		}
	}
}

// getWorkspace streams the workspace {name}, when no session runs, starts or uploads
// in it (409), as a tar, bounded by the tenant's upload limits. A workspace past them,
// or changed under the read, ends the stream without the archive's end: the client
// sees a truncated tar, never a short one that looks whole.
func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	roots, name, ws, ok := s.existingWorkspace(w, r, id)
	if !ok {
		return
	}
	// A running session's workspace is changing, and holds cordon's placeholders for
	// the paths its contract keeps from the sandbox (.envrc, .vscode/, …): what a
	// download would get is no state of the tenant's tree.
	if sid := s.runningIn(roots, name); sid != "" {
		writeError(w, http.StatusConflict, "workspace "+name+": session "+sid+" runs in it; stop it first (or GET /v1/sessions/"+sid+"/patch)")
		return
	}
	// Nor while an upload fills it or a start makes it (its clone): the download would
	// be a whole archive of half a tree. Held, the lock refuses a start (409) until the
	// download ends.
	unlock, err := s.lockWorkspace(roots, name)
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	defer unlock()
	if _, ok := extendDeadlines(w, transferTimeout); !ok {
		return
	}
	w.Header().Set("Content-Type", api.Tar)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	lim := roots.t.Quotas.Upload
	// The archive's first 64 KiB are held until they are whole: a workspace past a
	// bound before them (a directory's entries are counted before any is packed) is
	// answered 413 with the error, not only a dropped connection.
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	_, _, err = workspace.Pack(bw, ws, workspace.Limits{Bytes: lim.Bytes, Entries: lim.Entries})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		s.log.Warn("workspace download cut short", logTenant, id.Tenant, "workspace", name, "err", err)
		if cw.n == 0 && errors.Is(err, workspace.ErrTooLarge) {
			w.Header().Del("Content-Type")
			writeError(w, http.StatusRequestEntityTooLarge, err.Error())
			return
		}
		panic(http.ErrAbortHandler) // the connection is dropped: no end-of-archive blocks
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// existingWorkspace is the request's {name}, a workspace of the caller's tenant that
// exists, or an answer: 400 for a bad name, 404 for no such workspace.
func (s *Server) existingWorkspace(w http.ResponseWriter, r *http.Request, id auth.Identity) (tenantRoots, string, string, bool) {
	roots, ok := s.roots(w, id)
	if !ok {
		return roots, "", "", false
	}
	name, ok := s.workspaceName(w, r, roots)
	if !ok {
		return roots, "", "", false
	}
	ws := roots.workspace(name)
	if fi, err := os.Lstat(ws); err != nil || !fi.IsDir() {
		writeError(w, http.StatusNotFound, "no such workspace")
		return roots, "", "", false
	}
	return roots, name, ws, true
}

// runningIn is the id of the session running in the workspace name, or "".
func (s *Server) runningIn(roots tenantRoots, name string) string {
	for _, rec := range records(roots) {
		if rec.Workspace == name && !rec.Warm && state(roots, rec) == stateRunning {
			return rec.ID
		}
	}
	return ""
}

// isWarm reports whether the workspace name is an unclaimed warm session's.
func (s *Server) isWarm(roots tenantRoots, name string) bool {
	for _, rec := range records(roots) {
		if rec.Warm && rec.Workspace == name {
			return true
		}
	}
	return false
}

// deleteWorkspace removes the workspace {name} when no session runs or starts in it.
func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	roots, name, ws, ok := s.existingWorkspace(w, r, id)
	if !ok {
		return
	}
	unlock, err := s.lockWorkspace(roots, name)
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	defer unlock()
	if _, ok := extendDeadlines(w, transferTimeout); !ok {
		return
	}
	if err := linux.RemoveTree(ws); err != nil {
		s.internal(w, id, "deleting a workspace", err)
		return
	}
	writeJSON(w, http.StatusOK, api.Workspace{Name: name})
}
