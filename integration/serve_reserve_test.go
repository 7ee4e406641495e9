package integration

import (
	"archive/tar"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// TestServeDiskReserve: once a tenant's sandboxes filled its disk, nothing cordon
// writes of the tenant's own data takes the blocks ext4 keeps for root, where the
// session logs go: a checkpoint of a staged session, a spill file of output past the
// cap, an uploaded workspace and a staged sandbox's own writes (made through an
// overlay cordon mounted) each fail cleanly, the reserve stays whole, and both
// sessions' logs are appended, sealed at the stop and verified.
//
// Each write is smaller than the reserve (5% of 64 MiB): with root's reserve open to
// it, it would succeed and stay there.
func TestServeDiskReserve(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    quotas: {disk: 64MiB}\n")
	stopSessionsAtEnd(t, s)
	root := filepath.Join(filepath.Dir(s.file), "acme")
	t.Run("bwrap", func(t *testing.T) { reserveKept(t, s, root, "bwrap") })
	t.Run("containers", func(t *testing.T) {
		requireEngines(t)
		for _, b := range containerBackends {
			t.Run(b, func(t *testing.T) { reserveKept(t, s, root, b) })
		}
	})
}

func reserveKept(t *testing.T, s *served, root, backend string) {
	acme := s.tcpClient("acme")
	startStaged := func(ws string) api.Session {
		code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: ws + "-" + backend, Backend: backend, Stage: true})
		var sess api.Session
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil || !sess.Stage {
			t.Fatalf("a staged start: %d %s", code, body)
		}
		return sess
	}
	mustRun := func(t *testing.T, id, script string) {
		t.Helper()
		if out, errb, last := outcome(t, acme.exec(t, id, "sh", "-c", script)); last.Result == nil || last.Result.ExitCode != 0 {
			t.Fatalf("%s: %q %q %+v", script, out, errb, last)
		}
	}
	// staged has a file of 1 MiB in its upper directory, copied by the automatic
	// checkpoint before the second command while there was room, and changed since
	// (its ctime): the next checkpoint copies it again.
	staged, overlaid := startStaged("staged"), startStaged("overlaid")
	mustRun(t, staged.ID, "dd if=/dev/zero of=payload bs=64K count=16 2>/dev/null")
	mustRun(t, staged.ID, "chmod 600 payload")
	plain := acme.start(t, "plain-"+backend, backend)
	// fill fills the disk from the plain session; its first MiB is a file of its own
	// (fill-1), which the upload's turn deletes. Before, it writes text, half a MiB of
	// lines the patch's turn changes in place.
	var full int64
	fill := func(t *testing.T) {
		t.Helper()
		script := "[ -e text ] || yes aaaaaaa | head -c 524288 > text; [ -e fill-1 ] || dd if=/dev/zero of=fill-1 bs=64K count=16 2>/dev/null; dd if=/dev/zero of=fill-$(date +%s%N) bs=1M count=200 2>&1; echo rc=$?"
		if out, _, _ := outcome(t, acme.exec(t, plain.ID, "sh", "-c", script)); !strings.Contains(out, "No space left") {
			t.Fatalf("filling the disk: %q; want ENOSPC", out)
		}
		if full = reserveLeft(t, root); full < 2<<20 {
			t.Fatalf("%d bytes left for root after a sandbox filled its disk; want most of the reserve (3.2 MiB)", full)
		}
	}
	fill(t)
	// kept checks the reserve lost no more than the logs' few records since the fill.
	kept := func(t *testing.T, what string) {
		t.Helper()
		if left := reserveLeft(t, root); left < full-256<<10 {
			t.Errorf("after %s, %d bytes of the reserve are left; %d after the fill: the tenant's data took them", what, left, full)
		}
	}

	t.Run("upload", func(t *testing.T) {
		// A MiB left for sandboxes (past the start's check, a hundredth of the disk),
		// and an upload of 2: the second must not come from the reserve.
		mustRun(t, plain.ID, "rm fill-1")
		code, body := acme.upload(t, "uploaded-"+backend, makeTar(t, tarEntry{name: "big", typ: tar.TypeReg, data: strings.Repeat("x", 2<<20)}))
		if code != http.StatusTooManyRequests || !strings.Contains(body, `"quota":"disk"`) || !strings.Contains(body, "no space left") {
			t.Errorf("an upload of 2 MiB with 1 MiB left: %d %s; want 429 with quota disk, saying no space is left", code, body)
		}
		kept(t, "an upload")
		fill(t)
	})
	t.Run("staged sandbox", func(t *testing.T) {
		out, _, _ := outcome(t, acme.exec(t, overlaid.ID, "sh", "-c", "dd if=/dev/zero of=more bs=64K count=16 2>&1; echo rc=$?"))
		if !strings.Contains(out, "No space left") {
			t.Errorf("a staged sandbox writing 1 MiB through its overlay on a full disk: %q; want ENOSPC", out)
		}
		kept(t, "a staged sandbox's write")
	})
	t.Run("checkpoint", func(t *testing.T) {
		code, body := acme.call(t, "POST", "/v1/sessions/"+staged.ID+"/checkpoint", api.CheckpointRequest{Name: "full"})
		if code == http.StatusOK || code < 400 || !strings.Contains(body, "no space left") {
			t.Errorf("a checkpoint of 1 MiB on a full disk: %d %s; want an error saying no space is left", code, body)
		}
		kept(t, "a checkpoint")
		// The command after it has no checkpoint to undo it: refused, saying why.
		_, _, last := outcome(t, acme.exec(t, staged.ID, "echo", "refused"))
		if last.Result != nil || !strings.Contains(last.Error, "no space left") {
			t.Errorf("a command of a staged session whose automatic checkpoint finds the disk full: %+v; want it refused, saying no space is left", last)
		}
		kept(t, "an automatic checkpoint")
	})
	t.Run("spill", func(t *testing.T) {
		out, _, last := outcome(t, acme.execReq(t, plain.ID, api.ExecRequest{Argv: []string{"sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' a"}, Cap: 1000}))
		r := last.Result
		if r == nil || r.ExitCode != 0 || !r.Truncated || r.SpillPath != "" || !strings.Contains(out, "not saved") {
			t.Errorf("1 MiB of output past a cap of 1000 on a full disk: %+v, %.200q...; want it cut, no spill file, the rest not saved", r, out)
		}
		kept(t, "a spill")
	})
	t.Run("patch", func(t *testing.T) {
		// Every line changed in place (no new block): the command's patch, over a
		// MiB, is more than its log line holds, and no file can have the rest.
		mustRun(t, plain.ID, "tr a b < text | dd of=text conv=notrunc 2>/dev/null")
		kept(t, "a patch")
		code, body := acme.call(t, "GET", "/v1/sessions/"+plain.ID+"/patch", nil)
		if code != http.StatusOK || !strings.Contains(body, "diff --git a/text b/text") || !strings.Contains(body, "-aaaaaaa") {
			t.Errorf("the session's patch after its disk filled: %d %.300s; want 200 with the patch's head", code, body)
		}
	})
	if out, _, last := outcome(t, acme.exec(t, plain.ID, "echo", "still")); last.Result == nil || last.Result.ExitCode != 0 || out != "still\n" {
		t.Errorf("the plain session on the full disk: %q %+v; want it still running commands", out, last.Result)
	}
	for _, sess := range []api.Session{staged, overlaid, plain} {
		if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != 200 {
			t.Fatalf("stop: %d %s", code, body)
		}
		r := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", sess.ID, "--audit-dir", filepath.Join(root, "audit")), "audit verify")
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "sealed") {
			t.Errorf("the log of session %s, stopped on the full disk: %s; want intact and sealed", sess.ID, r)
		}
	}
	// Room again for the next backend's turn.
	if err := os.RemoveAll(filepath.Join(root, "workspaces", "plain-"+backend)); err != nil {
		t.Fatal(err)
	}
}

// reserveLeft is what is left of the reserve of the file system at root: what root
// may write there past what the sandboxes may (room freed meanwhile, by the previous
// backend's turn, is the sandboxes' to take).
func reserveLeft(t *testing.T, root string) int64 {
	t.Helper()
	_ = exec.Command("sync", "-f", root).Run()
	free, err := linux.FSFree(root)
	if err != nil {
		t.Fatal(err)
	}
	_, avail, err := linux.FSSpace(root)
	if err != nil {
		t.Fatal(err)
	}
	return free - avail
}
