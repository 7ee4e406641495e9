package integration

import (
	"archive/tar"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// Red team, round 4: warm pools, the tenant's disk, prune, the request path.

// workspaceNames lists the tenant's workspaces as the API answers them.
func workspaceNames(t *testing.T, a apiClient) []string {
	t.Helper()
	code, body := a.call(t, "GET", "/v1/workspaces", nil)
	var list api.WorkspaceList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("GET /v1/workspaces: %d %s", code, body)
	}
	var names []string
	for _, w := range list.Workspaces {
		names = append(names, w.Name)
	}
	return names
}

// TestRed4FailedRefillLeavesNoWorkspace: a pool whose refill cannot start (here the
// tenant's sessions quota is full after the claim) tries again every 2 s. Each try
// must leave nothing behind: an empty warm-* directory per try would be listed as the
// tenant's, count against its workspaces quota, and fill its disk's inodes without
// bound.
func TestRed4FailedRefillLeavesNoWorkspace(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {sessions: 1, workspaces: 3}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "a warm session", func() bool { return len(warmIDs(t, serve)) == 1 })
	acme := s.tcpClient("acme")
	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || !sess.Warm {
		t.Fatalf("claim: %d %s", code, body)
	}
	// The refill is refused at the sessions quota, again and again.
	waitFor(t, time.Minute, "four refused refills", func() bool {
		return strings.Count(s.stderr.String(), "warm pool: no session started") >= 4
	})
	if got := workspaceNames(t, acme); len(got) != 1 || got[0] != sess.Workspace {
		t.Errorf("the tenant's workspaces after refused refills: %q; want only the claimed session's %q", got, sess.Workspace)
	}
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(s.file), "acme", "workspaces"))
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the workspaces root holds %q; want only %q", names, sess.Workspace)
	}
	// Its workspaces quota is its own: the refused refills took none of it.
	if code, body := acme.upload(t, "mine", makeTar(t, tarEntry{name: "f", typ: tar.TypeReg, data: "x"})); code != http.StatusCreated {
		t.Errorf("an upload after refused refills: %d %s; want 201", code, body)
	}
}
