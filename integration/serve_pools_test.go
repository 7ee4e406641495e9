package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/server/api"
)

// TestServeNamedPools: a tenant's pools are each of one contract. A start naming a pool
// gets a session of that pool's contract and stage, claimed when one is ready and
// started cold on the same contract when none is; a start naming nothing claims only
// from a pool of the base contract. An unknown pool, or a pool beside a workspace,
// contract or stage, is 400; another tenant cannot name the pool at all. Claims are
// counted per pool.
func TestServeNamedPools(t *testing.T) {
	dir := shortTempDir(t)
	py := filepath.Join(dir, "py.yaml")
	mustWrite(t, py, "version: 1\nfilesystem: {deny_write: [Makefile]}\n")
	s := startServeWith(t, "    pools:\n      - {name: default, size: 1, backend: bwrap}\n"+
		"      - {name: py, size: 1, backend: bwrap, stage: true, contract: "+py+"}\n    quotas: {sessions: 7}\n")
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "both pools to hold their warm session", func() bool { return len(warmIDs(t, serve)) == 2 })
	s.waitClaimable(t, time.Minute, "acme", "default", 1)
	s.waitClaimable(t, time.Minute, "acme", "py", 1)
	acme, beta := s.tcpClient("acme"), s.tcpClient("beta")

	start := func(c apiClient, req api.StartRequest) api.Session {
		t.Helper()
		code, body := c.call(t, "POST", "/v1/sessions", req)
		var sess api.Session
		if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
			t.Fatalf("start %+v: %d %s", req, code, body)
		}
		t.Cleanup(func() { c.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil) })
		return sess
	}
	// writesMakefile runs a write of the name py's contract protects.
	writesMakefile := func(id string) bool {
		t.Helper()
		_, _, last := outcome(t, acme.exec(t, id, "sh", "-c", "echo all: > Makefile && echo ok > other"))
		if last.Result == nil {
			t.Fatalf("exec in %s: no result", id)
		}
		return last.Result.ExitCode == 0
	}

	plain := start(acme, api.StartRequest{})
	if !plain.Warm || plain.Pool != "default" || plain.Stage {
		t.Errorf("a start naming nothing: %+v; want claimed from the base's pool, unstaged", plain)
	}
	if !writesMakefile(plain.ID) {
		t.Error("the base's session could not write Makefile")
	}

	claimed := start(acme, api.StartRequest{Pool: "py"})
	if !claimed.Warm || claimed.Pool != "py" || !claimed.Stage {
		t.Errorf("a start naming py: %+v; want claimed from py, staged", claimed)
	}
	if writesMakefile(claimed.ID) {
		t.Error("a session of py wrote Makefile, which py's contract denies")
	}
	// Its pool just emptied: the next is claimed if the refill was quick, cold
	// otherwise; py's contract and stage either way.
	next := start(acme, api.StartRequest{Pool: "py"})
	if !next.Stage || next.Warm != (next.Pool == "py") {
		t.Errorf("a second start naming py: %+v; want staged, its pool named only when claimed", next)
	}
	if writesMakefile(next.ID) {
		t.Errorf("the second start naming py (warm %v) wrote Makefile", next.Warm)
	}

	for _, c := range []struct {
		who  apiClient
		req  api.StartRequest
		want string
	}{
		{acme, api.StartRequest{Pool: "nope"}, `no pool \"nope\" (its pools: default, py)`},
		{acme, api.StartRequest{Pool: "py", Workspace: "mine"}, "names no workspace, contract or stage"},
		{acme, api.StartRequest{Pool: "py", Contract: "version: 1\n"}, "names no workspace, contract or stage"},
		{acme, api.StartRequest{Pool: "py", Stage: true}, "names no workspace, contract or stage"},
		{beta, api.StartRequest{Pool: "py"}, `no pool \"py\" (its pools: none)`},
	} {
		if code, body := c.who.call(t, "POST", "/v1/sessions", c.req); code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("start %+v: %d %s; want 400 %q", c.req, code, body, c.want)
		}
	}
	waitFor(t, 2*time.Minute, "both pools to refill", func() bool { return len(warmIDs(t, serve)) == 2 })
	// The CLI as a client names a pool with --pool.
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	mustWrite(t, caFile, string(s.ca.pem))
	cli := remoteCLI{t: t, env: cleanEnv()}.with("CORDON_HOST=https://"+s.addr, "CORDON_TLS_CA="+caFile, "CORDON_TOKEN="+s.tokens["acme"])
	out, stderr, code := cli.run("session", "start", "--pool", "py")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("cordon --host session start --pool py: %d %q %q", code, out, stderr)
	}
	t.Cleanup(func() { acme.call(t, "POST", "/v1/sessions/"+id+"/stop", nil) })
	if writesMakefile(id) {
		t.Error("the CLI's session of py wrote Makefile")
	}
	if _, stderr, code := cli.run("session", "start", "--pool", "nope"); code == 0 || !strings.Contains(stderr, `no pool "nope"`) {
		t.Errorf("--pool nope: %d %q; want the server's refusal", code, stderr)
	}
	// A start with a contract of its own is cold even when it is the pool's text. (Four
	// sessions are the tenant's here, two warm, and py's refill may be under way
	// since the CLI's claim: a quota of 7 leaves this start room either way.)
	data, _ := os.ReadFile(py)
	if own := start(acme, api.StartRequest{Contract: string(data)}); own.Warm || own.Pool != "" {
		t.Errorf("a start with a contract: %+v; want a cold start", own)
	}

	select {
	case addr := <-s.metrics:
		text := scrapeMetrics(t, addr)
		for _, want := range []string{
			`cordon_pool_claims_total{pool="default",result="hit",tenant="acme"} 1`,
			`cordon_pool_claims_total{pool="default",result="miss",tenant="acme"} 0`,
		} {
			if !strings.Contains(text, want+"\n") {
				t.Errorf("the scrape has no %s", want)
			}
		}
		hits, misses := `cordon_pool_claims_total{pool="py",result="hit",tenant="acme"} `, `cordon_pool_claims_total{pool="py",result="miss",tenant="acme"} `
		// py was asked for three times (twice by the API, once by the CLI after the
		// refill): the second was a hit only if its refill was quicker than the test.
		if next.Warm {
			hits, misses = hits+"3", misses+"0"
		} else {
			hits, misses = hits+"2", misses+"1"
		}
		for _, want := range []string{hits, misses} {
			if !strings.Contains(text, want+"\n") {
				t.Errorf("the scrape has no %s", want)
			}
		}
	case <-time.After(30 * time.Second):
		t.Errorf("no metrics listener after 30s")
	}
}

// TestServePoolRetires: a warm session no one claimed is retired, its workspace and
// record removed, when it reaches the tenant's wall time (the pool starts a fresh one)
// and at the server's graceful stop. Left behind, its record would be forgotten among
// the stopped ones and its workspace become one of the tenant's, counted against its
// quota.
func TestServePoolRetires(t *testing.T) {
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {wall: 2s}\n")
	stopPoolAtEnd(t, s)
	acmeRoot := filepath.Join(filepath.Dir(s.file), "acme")
	serve, workspaces := filepath.Join(acmeRoot, "run", "serve"), filepath.Join(acmeRoot, "workspaces")
	var first string
	waitFor(t, 2*time.Minute, "the pool to hold its warm session", func() bool {
		ids := warmIDs(t, serve)
		if len(ids) == 1 {
			first = ids[0]
		}
		return first != ""
	})
	var rec struct{ Workspace string }
	data, err := os.ReadFile(filepath.Join(serve, first+".json"))
	if err != nil || json.Unmarshal(data, &rec) != nil || !strings.HasPrefix(rec.Workspace, "warm-") {
		t.Fatalf("warm session %s's record: %v %s", first, err, data)
	}
	waitFor(t, 2*time.Minute, "the warm session to be retired at the wall time and replaced", func() bool {
		ids := warmIDs(t, serve)
		return len(ids) == 1 && ids[0] != first
	})
	waitFor(t, 30*time.Second, "the retired session's record and workspace to be removed", func() bool {
		_, errRec := os.Stat(filepath.Join(serve, first+".json"))
		_, errWs := os.Stat(filepath.Join(workspaces, rec.Workspace))
		return os.IsNotExist(errRec) && os.IsNotExist(errWs)
	})
	s.terminate(t)
	left, _ := filepath.Glob(filepath.Join(workspaces, "warm-*"))
	if len(left) != 0 || len(warmIDs(t, serve)) != 0 {
		t.Errorf("after the graceful stop: warm workspaces %v, warm records %v; want none", left, warmIDs(t, serve))
	}
	if !strings.Contains(s.stderr.String(), "warm pool: session retired") {
		t.Errorf("the daemon's log does not say it retired warm sessions:\n%s", s.stderr.String())
	}
}

// TestServePoolClaimRetryAfter: a claimed session's wall time counts from its claim in
// the ledger too, so a start refused past the sessions quota is told to come back when
// the claimed session will end, not when it would have ended counted from the pool.
func TestServePoolClaimRetryAfter(t *testing.T) {
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {sessions: 1, wall: 20s}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "the pool to hold its warm session", func() bool { return len(warmIDs(t, serve)) == 1 })
	time.Sleep(8 * time.Second) // it waits in the pool: 8 of its 20 s
	acme := s.tcpClient("acme")
	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
	if code != http.StatusCreated || !strings.Contains(body, `"warm":true`) {
		t.Fatalf("claim: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", acme.base+"/v1/sessions", strings.NewReader(`{"workspace": "cold"}`))
	req.Header.Set("Authorization", "Bearer "+acme.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := acme.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	// Counted from the claim: 20 s less the moment since; from the pool it would be
	// at most 12.
	if resp.StatusCode != http.StatusTooManyRequests || retry < 15 {
		t.Errorf("a start past the sessions quota: %d, Retry-After %q; want 429 and about 20 s", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestServeWarmNamesAreTheServers: a tenant cannot make a new workspace named as the
// warm pools' are (by upload or by start), so a warm-* directory no record names is
// one a server that died left mid-start: the next start removes it when empty (a
// non-empty one could be a claimed session's, the tenant's for good, and is kept).
func TestServeWarmNamesAreTheServers(t *testing.T) {
	s := startServe(t)
	acme := s.tcpClient("acme")
	if code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "warm-mine"}); code != http.StatusBadRequest || !strings.Contains(body, "warm pools'") {
		t.Errorf("a start in a new warm-mine: %d %s; want 400", code, body)
	}
	req, _ := http.NewRequest("PUT", acme.base+"/v1/workspaces/warm-mine", strings.NewReader(strings.Repeat("\x00", 1024)))
	req.Header.Set("Authorization", "Bearer "+acme.token)
	req.Header.Set("Content-Type", "application/x-tar")
	if resp, err := acme.c.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an upload to a new warm-mine: %v %v; want 400", resp, err)
	} else {
		resp.Body.Close()
	}
	wsRoot := filepath.Join(filepath.Dir(s.file), "acme", "workspaces")
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil { // the tenant's disk stays mounted
		t.Fatal(err)
	}
	<-s.done
	empty, kept := filepath.Join(wsRoot, "warm-00000000deadbeef"), filepath.Join(wsRoot, "warm-11111111deadbeef")
	for _, d := range []string{empty, kept} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(kept, "f"), "work\n")
	s.launch(t)
	// The server adopts (and cleans) its roots as it starts serving.
	waitFor(t, 30*time.Second, "the empty warm-* workspace no record names to be removed", func() bool {
		_, err := os.Stat(empty)
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(filepath.Join(kept, "f")); err != nil {
		t.Errorf("a warm-* workspace with files in it, after a start: %v; want it kept", err)
	}
}
