package server

import (
	"net/http"
	"path/filepath"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

// pruneRuns removes the tenant's sealed, intact runs as `cordon audit prune` does, on
// its audit root (package audit's Prune: never a live, crashed or tampered run, each
// removal recorded). It is how a tenant past its audit quota makes room, without the
// operator; the quota is measured again at the next start.
func (s *Server) pruneRuns(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	if id.Roles.Has(config.RoleAgent) {
		// Pruning removes evidence: the credential an agent runs with never removes
		// its own runs' logs, as it never approves its own gate.
		writeError(w, http.StatusForbidden, "a credential with the agent role may not prune runs: use an auditor's that is no agent's")
		return
	}
	var req api.PruneRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	opts := audit.PruneOptions{Keep: req.Keep, DryRun: req.DryRun}
	if req.OlderThan != "" {
		d, err := audit.ParseAge(req.OlderThan)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, "older_than: want a duration such as 72h or 30d, more than 0")
			return
		}
		opts.OlderThan = d
	}
	if req.Keep < 0 || (req.OlderThan == "" && req.Keep == 0) {
		writeError(w, http.StatusBadRequest, "want older_than (a duration) or keep (at least 1)")
		return
	}
	t := s.tenantOf(id)
	res, err := audit.Prune(t.AuditRoot(), opts)
	if err != nil {
		s.internal(w, id, "pruning runs", err)
		return
	}
	if !req.DryRun && len(res.Removed) > 0 {
		s.quota.Remeasure(id.Tenant)
		s.log.Info("runs pruned", logTenant, id.Tenant, logCredential, id.Credential, "runs", len(res.Removed))
	}
	out := api.PruneResult{Removed: []api.PrunedRun{}, Kept: []api.KeptRun{}}
	for _, p := range res.Removed {
		out.Removed = append(out.Removed, api.PrunedRun{Run: p.Run, Workspace: workspaceName(t.Workspaces(), p.Workspace),
			Started: p.Started, Ended: p.Ended, Lines: p.Lines, Head: p.Head})
	}
	for _, k := range res.Kept {
		out.Kept = append(out.Kept, api.KeptRun{Run: k.Run, Why: k.Why})
	}
	writeJSON(w, http.StatusOK, out)
}

// workspaceName is ws's name in the tenant's workspaces root, "" when ws is not one
// of them: a host path of the server's is not the tenant's to see.
func workspaceName(root, ws string) string {
	if ws == "" || filepath.Dir(filepath.Clean(ws)) != filepath.Clean(root) {
		return ""
	}
	return filepath.Base(ws)
}
