package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// TestServeTenantDisk: a tenant's sandboxes that write without end fill the tenant's
// own disk (quotas.disk), on every backend: the write fails with ENOSPC, the host's
// disk holds no more than the quota for it, the session still runs commands and its
// log is sealed at the stop (cordon writes into the reserve its sandboxes cannot), a
// start or checkpoint on the full disk is the tenant's 429 (quota disk), and another
// tenant writes on. The server unmounts the disk when it stops.
func TestServeTenantDisk(t *testing.T) {
	testutil.RequireBwrap(t)
	const quota = 64 << 20
	s := startServeWith(t, "    quotas: {disk: 64MiB}\n")
	stopSessionsAtEnd(t, s)
	acmeRoot := filepath.Join(filepath.Dir(s.file), "acme")
	if !mountRoot(acmeRoot) {
		t.Fatalf("acme's root %s is not a mount point while the server runs", acmeRoot)
	}
	acme, beta := s.tcpClient("acme"), s.tcpClient("beta")
	select {
	case addr := <-s.metrics:
		code, body, _ := do(t, &http.Client{Timeout: 10 * time.Second}, "GET", "http://"+addr+"/metrics", "", nil)
		if code != 200 || !strings.Contains(body, `cordon_tenant_disk_bytes{kind="size",tenant="acme"}`) || !strings.Contains(body, `cordon_tenant_disk_bytes{kind="available",tenant="beta"}`) {
			t.Errorf("/metrics: %d; want each tenant's disk size and what is available:\n%.2000s", code, body)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("no metrics listener after 30s")
	}
	fill := func(t *testing.T, backend string) {
		sess := acme.start(t, "fill-"+backend, backend)
		var staged api.Session
		if backend == "bwrap" {
			code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "staged", Backend: "bwrap", Stage: true})
			if code != http.StatusCreated || json.Unmarshal([]byte(body), &staged) != nil {
				t.Fatalf("a staged start: %d %s", code, body)
			}
			if _, _, res := outcome(t, acme.exec(t, staged.ID, "sh", "-c", "head -c 4194304 /dev/urandom > a")); res.Result == nil || res.Result.ExitCode != 0 {
				t.Fatalf("exec in the staged session: %+v", res)
			}
		}
		out, _, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "dd if=/dev/zero of=fill bs=1M count=200 2>&1; echo rc=$?"))
		if !strings.Contains(out, "No space left") || strings.Contains(out, "rc=0") {
			t.Errorf("on %s, a sandbox writing 200 MiB on a 64 MiB disk: %q (%+v); want ENOSPC", backend, out, last.Result)
		}
		if backend == "bwrap" {
			code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "late", Backend: "bwrap"})
			if code != 429 || !strings.Contains(body, `"quota":"disk"`) {
				t.Errorf("a start while the tenant's disk is full: %d %s; want 429 with quota disk", code, body)
			}
			// A checkpoint copies the stage's 4 MiB into the tenant's run root, on
			// the same full disk: the tenant's quota, not the server's failure.
			code, body = acme.call(t, "POST", "/v1/sessions/"+staged.ID+"/checkpoint", api.CheckpointRequest{Name: "full"})
			if code != 429 || !strings.Contains(body, `"quota":"disk"`) {
				t.Errorf("a checkpoint while the tenant's disk is full: %d %s; want 429 with quota disk", code, body)
			}
			if code, body := acme.call(t, "POST", "/v1/sessions/"+staged.ID+"/stop", nil); code != 200 {
				t.Fatalf("stop: %d %s", code, body)
			}
		}
		if fi, err := os.Stat(acmeRoot + ".disk"); err != nil || fi.Sys().(*syscall.Stat_t).Blocks*512 > quota {
			t.Errorf("on %s, the tenant's image uses more of the host's disk than its quota, %d (%v)", backend, quota, err)
		}
		// Every inode too: ext4 keeps no inodes for root, so cordon must still
		// record and seal the session's log without new files.
		if out, _, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "mkdir many && cd many && seq 1 40000 | xargs touch 2>&1 | tail -1; ls | wc -l")); !strings.Contains(out, "No space left") {
			t.Errorf("on %s, a sandbox making 40000 files on a 64 MiB disk: %q (%+v); want ENOSPC", backend, out, last.Result)
		}
		if out, _, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "echo still")); last.Result == nil || last.Result.ExitCode != 0 || out != "still\n" {
			t.Errorf("on %s, the session after its inodes ran out: %q %+v; want it still running commands", backend, out, last.Result)
		}
		if out, _, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "rm -rf fill many; echo again")); last.Result == nil || last.Result.ExitCode != 0 || out != "again\n" {
			t.Errorf("on %s, the session after its disk filled: %q %+v; want it still running commands", backend, out, last.Result)
		}
		if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != 200 {
			t.Fatalf("stop: %d %s", code, body)
		}
		r := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", sess.ID, "--audit-dir", filepath.Join(acmeRoot, "audit")), "audit verify")
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "sealed") {
			t.Errorf("on %s, the log of a session that filled its disk: %s; want intact and sealed", backend, r)
		}
	}
	t.Run("bwrap", func(t *testing.T) { fill(t, "bwrap") })
	t.Run("another tenant writes on", func(t *testing.T) {
		sess := beta.start(t, "writer", "bwrap")
		if out, _, last := outcome(t, beta.exec(t, sess.ID, "sh", "-c", "dd if=/dev/zero of=big bs=1M count=80 2>&1 && echo wrote")); !strings.Contains(out, "wrote") {
			t.Errorf("beta writing 80 MiB: %q %+v", out, last.Result)
		}
	})
	t.Run("containers", func(t *testing.T) {
		requireEngines(t)
		for _, b := range containerBackends {
			t.Run(b, func(t *testing.T) { fill(t, b) })
		}
	})
	serveStop(t, s)
	if mountRoot(acmeRoot) {
		t.Errorf("acme's disk is still mounted after the server stopped with no session left")
	}
}

// mountRoot reports whether path is a mount point.
func mountRoot(path string) bool {
	root, _, err := linux.MountRoot(path)
	return err == nil && root
}
