package integration

// Red-team tests of `cordon serve`: each attacks the real daemon as a hostile API
// client, a hostile tenant or a hostile sandboxed process, and asserts the SAFE
// behaviour, so a test that fails is an attack that worked.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// rawTLS sends raw bytes on a fresh TLS connection to the daemon and returns what it
// answered until it closed the connection or 5 s passed.
func rawTLS(t *testing.T, s *served, req string) string {
	t.Helper()
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestRedAuthOddHeaders: odd Authorization headers never authenticate, and never fall
// through to another way of authenticating (a client certificate, the unix peer's uid).
func TestRedServeAuthOddHeaders(t *testing.T) {
	s := startServe(t)
	base := "https://" + s.addr
	tok := s.tokens["acme"]
	lead, _, _ := s.ca.issue(t, "lead.acme", false)
	for _, h := range []string{
		"Bearer", "Bearer ", "Bearer  ", "Bearer\t" + tok, "Bearer " + tok + " x",
		"Bearer " + strings.ToUpper(tok), "Token " + tok, tok, "Bearer " + tok + "," + tok,
		"Bearer " + strings.Repeat("A", 600),
	} {
		// With a valid client certificate: a bad header is not retried as the certificate.
		code, body, _ := do(t, s.client(lead), "GET", base+"/v1/whoami", "", nil, "Authorization", h)
		if code != 401 {
			t.Errorf("Authorization %q with lead.acme's certificate: got %d %s; want 401", h, code, body)
		}
	}
	// A NUL or a CR in the header, sent raw.
	for _, h := range []string{"Bearer " + tok + "\x00", "Bearer \x00" + tok, "Bearer " + tok + "\rX-A: b"} {
		if got := rawTLS(t, s, "GET /v1/whoami HTTP/1.1\r\nHost: c\r\nAuthorization: "+h+"\r\n\r\n"); strings.Contains(got, `"tenant"`) {
			t.Errorf("Authorization %q sent raw: answered %q", h, got)
		}
	}
	// Two Authorization headers, one valid.
	req, _ := http.NewRequest("GET", base+"/v1/whoami", nil)
	req.Header.Add("Authorization", "Bearer "+tok)
	req.Header.Add("Authorization", "Bearer "+s.tokens["beta"])
	if resp, err := s.client().Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("two Authorization headers: got %d; want 401", resp.StatusCode)
		}
	}
	// On the unix socket, as root (acme's auditor by uid): an empty header is not the uid.
	out, _ := exec.Command("curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
		"-H", "Authorization: Bearer x", "--unix-socket", s.sock, "http://cordon/v1/whoami").Output()
	if string(out) != "401" {
		t.Errorf("unix socket as root with a bad token: got %s; want 401", out)
	}
	// Every route but health needs a credential, whatever the path's spelling.
	for _, p := range []string{"/v1/openapi.json", "/v1/whoami", "/v1/sessions", "/v1/gates", "/v1/runs",
		"/v1//whoami", "/v1/./whoami", "/V1/whoami", "/v1/health/../whoami", "/v1/health%2f..%2fwhoami", "/v1/whoami/"} {
		code, body, _ := do(t, s.client(), "GET", base+p, "", nil)
		if code < 300 || code >= 500 || (code == 200 && p != "/v1/health") {
			t.Errorf("GET %s with no credential: got %d %s; want a 3xx or 4xx", p, code, body)
		}
		if strings.Contains(body, `"tenant"`) {
			t.Errorf("GET %s with no credential answered an identity: %s", p, body)
		}
	}
}

// TestRedCrossTenantEveryEndpoint: beta's credentials (its agent token, its approver
// and auditor certificate) on acme's session and run id, and mangled spellings of it,
// on every route with an {id}: never a 2xx, never a 5xx; acme's agent token may not
// list, show or decide its tenant's gates (an agent approving its own gate).
func TestRedServeCrossTenantEveryEndpoint(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "victim", "bwrap")
	acme.exec(t, sess.ID, "true") // the run has events
	betaLead, _, _ := s.ca.issue(t, "lead.beta", false)
	betaAgent := s.tcpClient("beta")
	betaApprover := apiClient{base: betaAgent.base, c: s.client(betaLead)}
	ids := []string{
		sess.ID, strings.ToUpper(sess.ID), strings.ToLower(sess.ID), sess.ID + "%00", sess.ID + "%2f",
		"..%2f..%2facme%2frun%2fserve%2f" + sess.ID, "%2e%2e%2f" + sess.ID, "..%2F" + sess.ID,
		url0(sess.ID), strings.Repeat("a", 5000), "%2e%2e", "%2e", sess.ID + ".json", sess.ID + "%2e",
	}
	bodies := map[string]string{"exec": `{"argv":["sh","-c","echo pwned > pwned.txt"]}`, "checkpoint": `{}`,
		"rollback": `{"to":"1"}`, "deny": `{}`}
	for _, rt := range api.Routes {
		prefix, suffix, ok := strings.Cut(rt.Path, "{id}")
		if !ok {
			continue
		}
		body := bodies[strings.TrimPrefix(suffix, "/")]
		for _, who := range []struct {
			name string
			a    apiClient
		}{{"beta agent", betaAgent}, {"beta approver/auditor", betaApprover}} {
			for _, id := range ids {
				code, got := rawCall(t, who.a, rt.Method, prefix+id+suffix, body)
				if code/100 == 2 || code/100 == 5 {
					t.Errorf("%s: %s %s: got %d %.200s; want a 4xx", who.name, rt.Method, prefix+id+suffix, code, got)
				}
			}
		}
	}
	// An agent's token may not see or decide its own tenant's gates.
	for _, c := range [][2]string{{"GET", "/v1/gates"}, {"GET", "/v1/gates/" + sess.ID}, {"POST", "/v1/gates/" + sess.ID + "/approve"},
		{"POST", "/v1/gates/" + sess.ID + "/deny"}, {"GET", "/v1/runs"}, {"GET", "/v1/runs/" + sess.ID + "/export"}} {
		if code, got := rawCall(t, acme, c[0], c[1], `{}`); code != 403 {
			t.Errorf("acme's agent token: %s %s: got %d %.200s; want 403", c[0], c[1], code, got)
		}
	}
	if got := acme.session(t, sess.ID); got.State != "running" {
		t.Errorf("acme's session after beta's requests: %+v; want running", got)
	}
	out, _, _ := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "test -e pwned.txt && echo PWNED || echo clean"))
	if out != "clean\n" {
		t.Errorf("acme's workspace after beta's requests: %q; want clean", out)
	}
}

func url0(id string) string { return strings.ReplaceAll(id, "-", "%2d") }

// rawCall sends a request whose path is sent exactly as written (escapes kept).
func rawCall(t *testing.T, a apiClient, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.base+"/", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.URL.Opaque = "//" + req.URL.Host + path
	if body != "" {
		req.Header.Set("Content-Type", api.JSON)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// TestRedSandboxReach: a command in acme's sandbox cannot read the server's records,
// contract files, the tenant's audit root or another tenant's root, cannot connect to
// the server's unix socket (where root's uid is acme's auditor), and cannot reach the
// server's TCP or metrics listeners.
func TestRedServeSandboxReach(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "prober", "bwrap")
	beta := s.tcpClient("beta")
	bsess := beta.start(t, "other", "bwrap")
	dir := filepath.Dir(s.file)
	metrics := ""
	select {
	case metrics = <-s.metrics:
	case <-time.After(5 * time.Second):
	}
	acmeRoot, betaRoot := filepath.Join(dir, "acme"), filepath.Join(dir, "beta")
	mustMkdir(t, filepath.Join(acmeRoot, "workspaces", "sibling"))
	probes := map[string]string{
		"list the socket's dir":      "ls " + filepath.Dir(s.sock),
		"read a session record":      "cat " + filepath.Join(acmeRoot, "run", "serve", sess.ID+".json"),
		"list the contracts":         "ls " + filepath.Join(acmeRoot, "run", "serve", "contracts"),
		"list the audit root":        "ls " + filepath.Join(acmeRoot, "audit"),
		"list the run root":          "ls " + filepath.Join(acmeRoot, "run"),
		"list the workspaces root":   "ls " + filepath.Join(acmeRoot, "workspaces") + " | grep -v '^prober$'",
		"list beta's workspace":      "ls " + filepath.Join(betaRoot, "workspaces", "other"),
		"read the config":            "cat " + s.file,
		"read the server key":        "cat " + filepath.Join(dir, "server.key"),
		"connect to the unix socket": "curl -sS --max-time 3 --unix-socket " + s.sock + " http://c/v1/whoami",
		"connect to the TCP API":     "curl -sSk --max-time 3 https://" + s.addr + "/v1/health",
		"see host processes":         "test $(ls /proc | grep -c '^[0-9]') -gt 20",
	}
	if metrics != "" {
		probes["connect to metrics"] = "curl -sS --max-time 3 http://" + metrics + "/metrics"
	}
	for what, cmd := range probes {
		out, errb, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", cmd))
		if last.Result != nil && last.Result.ExitCode == 0 {
			t.Errorf("the sandbox could %s (%s): stdout %.300q stderr %.200q", what, cmd, out, errb)
		}
	}
	_ = bsess
}

// TestRedExecStreamsStarveOtherTenants: one tenant's long-running exec streams are
// requests being served, which the listener never closes for a new connection; with
// enough source addresses a tenant could hold every one of the listener's
// connections, and another tenant could not even ask whoami. Safe: a tenant holds at
// most its share of long requests (the rest are 429 at once, the quota named), and
// another tenant is still answered.
func TestRedServeExecStreamsStarveOtherTenants(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "hog", "bwrap")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ips, perIP = 2, 40 // more than a tenant's 32 long requests, from two addresses
	var served, refused, failed atomic.Int64
	var firstErr atomic.Value
	firstErr.Store("")
	var wg, held sync.WaitGroup
	body, _ := json.Marshal(api.ExecRequest{Argv: []string{"sh", "-c", "echo up; exec sleep 600"}})
	for i := range ips {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}
		tr := &http.Transport{
			DialContext:     (&net.Dialer{LocalAddr: local, Timeout: 30 * time.Second}).DialContext,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: perIP,
		}
		c := &http.Client{Transport: tr}
		for range perIP {
			wg.Add(1)
			held.Add(1)
			go func() {
				defer wg.Done()
				done := sync.OnceFunc(held.Done)
				defer done()
				req, _ := http.NewRequestWithContext(ctx, "POST", acme.base+"/v1/sessions/"+sess.ID+"/exec", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+acme.token)
				req.Header.Set("Content-Type", api.JSON)
				resp, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap("", err.Error())
					return
				}
				defer resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
					if resp.Header.Get("Retry-After") == "" || !bytes.Contains(b, []byte(`"quota":"held_requests"`)) {
						firstErr.CompareAndSwap("", fmt.Sprintf("429 without Retry-After or quota: %s", b))
					}
					refused.Add(1)
					return
				}
				line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
				if err != nil || !bytes.Contains(line, []byte(`"fd":1`)) {
					failed.Add(1)
					firstErr.CompareAndSwap("", fmt.Sprintf("%d %s %v", resp.StatusCode, line, err))
					return
				}
				served.Add(1)
				done()
				io.Copy(io.Discard, resp.Body) // held until the test ends it
			}()
		}
	}
	held.Wait() // every request is streaming, refused or failed
	t.Logf("acme: %d exec streams held, %d refused, %d failed (first problem: %v)", served.Load(), refused.Load(), failed.Load(), firstErr.Load())
	if served.Load() > 32 || refused.Load() < ips*perIP-32 || failed.Load() != 0 || firstErr.Load() != "" {
		t.Errorf("acme's %d exec requests: %d held, %d refused, %d failed (%v); want at most 32 held and the rest 429 held_requests",
			ips*perIP, served.Load(), refused.Load(), failed.Load(), firstErr.Load())
	}
	beta := s.tcpClient("beta")
	if code, body := beta.call(t, "GET", "/v1/whoami", nil); code != 200 {
		t.Errorf("beta's whoami while acme holds %d exec streams: %d %s; want 200", served.Load(), code, body)
	}
	bsess := beta.start(t, "betaws", "bwrap")
	if out, _, _ := outcome(t, beta.execReq(t, bsess.ID, api.ExecRequest{Argv: []string{"echo", "beta"}})); out != "beta\n" {
		t.Errorf("beta's exec while acme is at its bound: %q; want beta", out)
	}
	cancel()
	wg.Wait()
}

// TestRedContractTricks: tenant contracts that try to widen the base or name host
// paths by YAML tricks, `..`, absolute paths, a workspace key: never a 201.
func TestRedServeContractTricks(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	yamls := map[string]string{
		"anchor and alias":      "version: 1\nx: &a [/etc]\nfilesystem: {readable: *a}\n",
		"merge key":             "version: 1\nfilesystem:\n  <<: {writable: [/etc]}\n",
		"duplicate key":         "version: 1\nfilesystem: {writable: [src]}\nfilesystem: {writable: [/]}\n",
		"duplicate quoted key":  "version: 1\nworkspace: /\n\"workspace\": /etc\n",
		"tagged path":           "version: 1\nfilesystem: {readable: [!!str /etc]}\n",
		"binary tag":            "version: 1\nfilesystem: {readable: [!!binary L2V0Yw==]}\n",
		"custom tag":            "version: 1\nfilesystem: !x {readable: [/etc]}\n",
		"dotdot readable":       "version: 1\nfilesystem: {readable: [\"@system\", ../../../beta]}\n",
		"dotdot writable":       "version: 1\nfilesystem: {writable: [../prober]}\n",
		"dotdot glob writable":  "version: 1\nfilesystem: {writable: [\"../**\"]}\n",
		"absolute deny":         "version: 1\nfilesystem: {deny_read: [/etc/passwd]}\n",
		"home":                  "version: 1\nfilesystem: {readable: [\"~/.ssh\"]}\n",
		"workspace key":         "version: 1\nworkspace: ..\n",
		"workspace other":       "version: 1\nworkspace: ../other\n",
		"network wider":         "version: 1\nnetwork: {allow: [\"*\"]}\n",
		"env pass":              "version: 1\nenv: {pass: [PATH, HOME, CORDON_RUN_ROOT]}\n",
		"limits unlimited":      "version: 1\nlimits: {memory: unlimited}\n",
		"limits huge":           "version: 1\nlimits: {memory: 1000TiB, pids: 99999999, cpu: 9999}\n",
		"second document":       "version: 1\n---\nversion: 1\nworkspace: /\n",
		"complex key":           "version: 1\n? workspace\n: /\n",
		"widen":                 "version: 1\nfilesystem: {widen: [{path: /etc, why: x}]}\n",
		"gate":                  "version: 1\ngates: [{name: g, run: [sh, -c, id]}]\n",
		"exec credential":       "version: 1\ncredentials: [{name: c, provider: exec, scope: {mint: [id], revoke: [id]}}]\n",
		"deeply nested flow":    "version: 1\nx: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n",
		"billion laughs":        "version: 1\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
		"nul byte":              "version: 1\nfilesystem: {readable: [\"src\\0/../../..\"]}\n",
		"docker image":          "version: 1\nimage: docker.io/library/alpine:latest\n",
		"version 2":             "version: 2\nworkspace: /\n",
		"commands":              "version: 1\ncommands: {allow: [\"*\"]}\n",
		"monitor exec":          "version: 1\nmonitor: {exec: []}\n",
		"writable dot":          "version: 1\nfilesystem: {writable: [\".\", \".git\"]}\n",
		"readable root via dot": "version: 1\nfilesystem: {readable: [\"./../../../../../../\"]}\n",
	}
	for name, yml := range yamls {
		code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "tricks", Contract: yml, Backend: "bwrap"})
		switch {
		case code == http.StatusCreated:
			var sess api.Session
			json.Unmarshal([]byte(body), &sess)
			acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
			// Admitted: only a failure when the contract it runs is wider. Record it.
			t.Logf("%s: admitted (%s)", name, strings.TrimSpace(yml))
			if name != "absolute deny" && name != "writable dot" && name != "env pass" && name != "limits huge" &&
				name != "docker image" && name != "commands" && name != "monitor exec" {
				t.Errorf("%s: a start with %q: got 201; want refused", name, yml)
			}
		case code != http.StatusBadRequest && code != http.StatusForbidden:
			t.Errorf("%s: got %d %s; want 400 or 403", name, code, body)
		}
	}
}

// TestRedPlantedLinks: a sandbox plants links in its workspace; the next session in
// the same workspace may not name them (a relative path through a link out of the
// workspace), and a restated base path is held to the same check.
func TestRedServePlantedLinks(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	first := acme.start(t, "planted", "bwrap")
	beta := filepath.Join(filepath.Dir(s.file), "beta")
	plant := fmt.Sprintf("mkdir -p d && ln -s /etc etc && ln -s %s b && ln -s ../../run r && ln -s ../.. up && ln -s nowhere dangling && ln -s d/../../.. sneaky && ln -s loop loop", beta)
	if _, errb, last := outcome(t, acme.exec(t, first.ID, "sh", "-c", plant)); last.Result == nil || last.Result.ExitCode != 0 {
		t.Fatalf("planting links: %q %+v", errb, last)
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+first.ID+"/stop", nil); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	for _, yml := range []string{
		"version: 1\nfilesystem: {readable: [\"@system\", etc]}\n",
		"version: 1\nfilesystem: {writable: [b]}\n",
		"version: 1\nfilesystem: {writable: [r]}\n",
		"version: 1\nfilesystem: {writable: [up]}\n",
		"version: 1\nfilesystem: {writable: [\"up/**\"]}\n",
		"version: 1\nfilesystem: {writable: [dangling]}\n",
		"version: 1\nfilesystem: {writable: [sneaky]}\n",
		"version: 1\nfilesystem: {writable: [loop]}\n",
		"version: 1\nfilesystem: {writable: [etc/cron.d]}\n",
		"version: 1\nfilesystem: {deny_write: [\"up/*\"]}\n",
		"version: 1\nfilesystem: {deny_read: [\"etc/passwd\"]}\n",
	} {
		code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "planted", Contract: yml, Backend: "bwrap"})
		if code == http.StatusCreated {
			var sess api.Session
			json.Unmarshal([]byte(body), &sess)
			out, _, _ := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "ls etc/ b/ r/ up/ 2>&1 | head -5"))
			acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
			t.Errorf("a contract naming a planted link %q: got 201 (the sandbox sees %q); want 403", yml, out)
		} else if code/100 == 5 {
			t.Errorf("%q: got %d %s; want a 4xx", yml, code, body)
		}
	}
	// The base contract itself in the planted workspace: it runs, but what it sees of
	// the links must not be the host's.
	sess := acme.start(t, "planted", "bwrap")
	out, _, _ := outcome(t, acme.exec(t, sess.ID, "sh", "-c", "cat etc/hostname b/workspaces/*/x r/serve/*.json 2>/dev/null; echo x > up/escaped 2>/dev/null; true"))
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.file), "acme", "escaped")); err == nil {
		t.Errorf("a write through a planted link up/ landed in the tenant's root")
	}
	if strings.Contains(out, `"contract"`) {
		t.Errorf("the sandbox read the server's records through a planted link: %q", out)
	}
}

// TestRedQuotaRace: concurrent starts race the sessions quota: never more sessions
// than the quota.
func TestRedServeQuotaRace(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    quotas: {sessions: 2}\n")
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	var wg sync.WaitGroup
	var created atomic.Int64
	codes := make(chan int, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: fmt.Sprintf("race%d", i), Backend: "bwrap"})
			codes <- code
			if code == http.StatusCreated {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	close(codes)
	var all []int
	for c := range codes {
		all = append(all, c)
	}
	if created.Load() > 2 {
		t.Errorf("8 concurrent starts with quotas.sessions 2: %d created (%v); want at most 2", created.Load(), all)
	}
	code, body := acme.call(t, "GET", "/v1/sessions", nil)
	if n := strings.Count(body, `"running"`); code != 200 || n > 2 {
		t.Errorf("running sessions: %d (%d %s); want at most 2", n, code, body)
	}
}

// TestRedSmuggling: a request with both Transfer-Encoding and Content-Length, or a
// second request hidden in a body, is never answered as an authenticated request of
// someone who did not send a credential; HTTP/2 is not served.
func TestRedServeSmuggling(t *testing.T) {
	s := startServe(t)
	hidden := "GET /v1/whoami HTTP/1.1\r\nHost: c\r\n\r\n"
	for name, req := range map[string]string{
		"TE and CL": "POST /v1/health HTTP/1.1\r\nHost: c\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden,
		"CL and TE": "POST /v1/sessions HTTP/1.1\r\nHost: c\r\nTransfer-Encoding: chunked\r\nContent-Length: 200\r\n\r\n0\r\n\r\n" + hidden,
		"two CL":    "POST /v1/sessions HTTP/1.1\r\nHost: c\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n" + hidden,
		"TE xchunk": "POST /v1/sessions HTTP/1.1\r\nHost: c\r\nTransfer-Encoding: xchunked\r\n\r\n" + hidden,
		"h2 prior":  "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	} {
		got := rawTLS(t, s, req)
		if strings.Contains(got, `"tenant"`) || strings.Contains(got, "HTTP/2") {
			t.Errorf("%s: answered %q", name, got)
		}
	}
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err == nil {
		if p := c.ConnectionState().NegotiatedProtocol; p == "h2" {
			t.Errorf("ALPN negotiated h2")
		}
		c.Close()
	}
}

// TestRedExecHostile: hostile exec requests get a 4xx (or a stream ending in an error
// frame), the session lives on, and a timeout_ms whose product in nanoseconds
// overflows is refused like any timeout past 24 hours.
func TestRedServeExecHostile(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "hostile", "bwrap")
	path := "/v1/sessions/" + sess.ID + "/exec"
	for name, body := range map[string]string{
		"NUL in argv":      `{"argv":["sh\u0000","-c","id"]}`,
		"NUL in dir":       `{"argv":["true"],"dir":"a\u0000b"}`,
		"dir outside":      `{"argv":["true"],"dir":"../../../../../../"}`,
		"huge cap":         `{"argv":["true"],"cap":9223372036854775807}`,
		"empty argv0":      `{"argv":[""]}`,
		"argv null":        `{"argv":null}`,
		"stdin not base64": `{"argv":["cat"],"stdin":"%%%"}`,
		"float timeout":    `{"argv":["true"],"timeout_ms":1e300}`,
	} {
		code, got := rawCall(t, acme, "POST", path, body)
		if code/100 == 5 || code == 0 {
			t.Errorf("%s: got %d %.200s; want a 4xx or a stream", name, code, got)
		}
	}
	// 18446740473710 ms is -1 h in nanoseconds once the product wraps: not > 24 h.
	code, got := rawCall(t, acme, "POST", path, `{"argv":["true"],"timeout_ms":18446740473710}`)
	if code != http.StatusBadRequest {
		t.Errorf("timeout_ms 18446740473710 (292 years, -1h once multiplied): got %d %.200q; want 400", code, got)
	}
	if got := acme.session(t, sess.ID); got.State != "running" {
		t.Errorf("the session after hostile execs: %+v; want running", got)
	}
}

// TestRedCertNameKinds: a credential names a certificate by its common name OR by a
// SAN, and the config says which; a certificate whose OTHER field carries the name
// must not stand for it. CAs check the fields differently (a CN is often free text the
// requester picks; a DNS SAN is proven), so common_name: X matching a SAN X, or san: X
// matching a CN X, lets whoever gets the looser field authenticate as the credential.
func TestRedServeCertNameKinds(t *testing.T) {
	s := startServe(t)
	cfg, err := os.ReadFile(s.file)
	if err != nil {
		t.Fatal(err)
	}
	withSAN := strings.Replace(string(cfg), "      - {name: root, roles: [auditor], uid: 0}\n",
		"      - {name: root, roles: [auditor], uid: 0}\n      - {name: robot, roles: [approver], client_cert: {san: robot.acme.example}}\n", 1)
	mustWrite(t, s.file, withSAN)
	s.cmd.Process.Kill()
	<-s.done
	s.launch(t)
	base := "https://" + s.addr
	// CN robot.acme.example, no SAN: the credential names a SAN.
	cnOnly, _, _ := s.ca.issue(t, "robot.acme.example", false)
	if code, body, _ := do(t, s.client(cnOnly), "GET", base+"/v1/whoami", "", nil); code != 401 {
		t.Errorf("a certificate with CN robot.acme.example for a credential naming san robot.acme.example: got %d %s; want 401", code, body)
	}
	// SAN lead.acme, CN something else: the credential names a common name.
	sanOnly, _, _ := s.ca.issue(t, "mallory", false, "lead.acme")
	if code, body, _ := do(t, s.client(sanOnly), "GET", base+"/v1/whoami", "", nil); code != 401 {
		t.Errorf("a certificate with CN mallory and DNS SAN lead.acme for a credential naming common_name lead.acme: got %d %s; want 401", code, body)
	}
	// A SAN is never taken for a common name: CN lead.acme with SAN lead.beta (beta's
	// credential names common_name lead.beta) is acme's lead, not a second match.
	sanNotCN, _, _ := s.ca.issue(t, "lead.acme", false, "lead.beta")
	if code, body, _ := do(t, s.client(sanNotCN), "GET", base+"/v1/whoami", "", nil); code != 200 || !strings.Contains(body, `"tenant":"acme","credential":"lead"`) {
		t.Errorf("a certificate with CN lead.acme and DNS SAN lead.beta: got %d %s; want 200 as acme/lead", code, body)
	}
	// Names of two credentials, each in its own field, stand for neither.
	both, _, _ := s.ca.issue(t, "lead.acme", false, "robot.acme.example")
	if code, body, _ := do(t, s.client(both), "GET", base+"/v1/whoami", "", nil); code != 401 {
		t.Errorf("a certificate with CN lead.acme and SAN robot.acme.example: got %d %s; want 401", code, body)
	}
}

// TestRedKillMidStart: the daemon SIGKILLed while session starts are in flight. A
// supervisor that came up is the server's to know: after the restart every live
// session of the tenant's run root has the server's record (listed, stoppable,
// charged to the quota, reaped at its wall time), none is left running unowned.
func TestRedServeKillMidStart(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	runRoot := filepath.Join(filepath.Dir(s.file), "acme", "run")
	for i, delay := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond,
		1200 * time.Millisecond, 1600 * time.Millisecond, 2200 * time.Millisecond} {
		acme := s.tcpClient("acme")
		go rawCall(t, acme, "POST", "/v1/sessions", fmt.Sprintf(`{"workspace":"kill%d","backend":"bwrap"}`, i))
		time.Sleep(delay)
		s.cmd.Process.Kill()
		<-s.done
		s.launch(t)
	}
	// The starts that were killed ended one way or the other by now.
	time.Sleep(3 * time.Second)
	for _, si := range wire.List(paths.Root(runRoot).Sessions()) {
		if !si.Alive() {
			continue
		}
		if _, err := os.Stat(filepath.Join(runRoot, "serve", si.ID+".json")); err != nil {
			t.Errorf("session %s (workspace %s) runs with no record of the server's: not listed, not stoppable over the API, not charged", si.ID, si.Workspace)
		}
	}
}

// TestRedExecTimeoutPastBase: the tenant's base contract sets commands.timeout 2s, and
// a tenant contract asking more is refused as wider; an exec's timeout_ms must not
// lift it either (it lets a command run up to 24 h whatever the base says).
func TestRedServeExecTimeoutPastBase(t *testing.T) {
	testutil.RequireBwrap(t)
	bdir := shortTempDir(t)
	basePath := filepath.Join(bdir, "base.yaml")
	mustWrite(t, basePath, "version: 1\ncommands: {timeout: 2s}\n")
	s := startServeWith(t, "    base_contract: "+basePath+"\n")
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	if code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "wider", Backend: "bwrap",
		Contract: "version: 1\ncommands: {timeout: 10s}\n"}); code != http.StatusForbidden {
		t.Errorf("a contract with commands.timeout 10s over a base of 2s: got %d %s; want 403", code, body)
	}
	sess := acme.start(t, "timeout", "bwrap")
	code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/exec", api.ExecRequest{Argv: []string{"sh", "-c", "sleep 4; echo survived"}, TimeoutMS: 10_000})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "commands.timeout") {
		t.Errorf("an exec with timeout_ms 10000 under a base commands.timeout of 2s: got %d %s; want 400 naming commands.timeout", code, body)
	}
	// The contract's own timeout holds when the exec names none.
	out, _, last := outcome(t, acme.execReq(t, sess.ID, api.ExecRequest{Argv: []string{"sh", "-c", "sleep 4; echo survived"}}))
	if out == "survived\n" || last.Result == nil || !last.Result.TimedOut {
		t.Errorf("an exec under a base commands.timeout of 2s ran 4 s (%+v); want it killed at 2 s", last.Result)
	}
}

// TestRedSandboxKillsItsSession: a command in the sandbox kills everything it can see
// (process 1 of its pid namespace included). The session may end, but it must end
// as a stop does: its log sealed, its contract file removed, its record not left
// "dead" forever (dead records are never forgotten, and every start reads them all
// under the server-wide sessions lock).
func TestRedServeSandboxKillsItsSession(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "suicide", "bwrap")
	acme.execReq(t, sess.ID, api.ExecRequest{Argv: []string{"sh", "-c", "kill -9 -1; kill -9 1; sleep 1"}, TimeoutMS: 5000})
	time.Sleep(3 * time.Second)
	got := acme.session(t, sess.ID)
	t.Logf("after the sandbox killed everything: %+v", got)
	if got.State == "dead" {
		audit := filepath.Join(filepath.Dir(s.file), "acme", "audit")
		r := runResult(t, exec.Command(testutil.Cordon(t), "audit", "verify", sess.ID, "--audit-dir", audit), "audit verify")
		t.Errorf("a sandbox made its session dead (supervisor gone without a stop); audit verify: %s", r)
	}
}

// TestRedWarmClaimWallTime: a session claimed from the pool is the claimer's for the
// tenant's whole wall time, counted from the claim; a warm session that waited in the
// pool must not be stopped moments after it is handed out.
func TestRedServeWarmClaimWallTime(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {wall: 8s}\n")
	stopPoolAtEnd(t, s)
	serve := filepath.Join(filepath.Dir(s.file), "acme", "run", "serve")
	waitFor(t, 2*time.Minute, "a warm session", func() bool { return len(warmIDs(t, serve)) == 1 })
	time.Sleep(4 * time.Second) // it waits in the pool: 4 of its 8 s
	acme := s.tcpClient("acme")
	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
		t.Fatalf("claim: %d %s", code, body)
	}
	testutil.Require(t, sess.Warm, "a warm claim, not a cold start (the warm session was replaced meanwhile): "+body)
	time.Sleep(6 * time.Second) // 10 s since it was started, 6 since it was claimed
	if got := acme.session(t, sess.ID); got.State != "running" {
		t.Errorf("a warm session 6 s after its claim, with a wall time of 8 s: %+v; want running", got)
	}
}
