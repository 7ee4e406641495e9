package integration

// Second red team of `cordon serve`: attacks on what came after the first (the held
// request bound, the workspaces API, patches). As in serve_redteam_test.go, each test
// attacks the real daemon and asserts the SAFE behaviour: a failing test is an
// attack that worked.

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// holdFollows opens n follow streams of run id through c (each answered 200 and its
// first line read) and returns how many were refused 429 held_requests instead. The
// streams stay open until ctx ends.
func holdFollows(t *testing.T, ctx context.Context, c *http.Client, base, id string, n int) (held, refused int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/runs/"+id+"/follow", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), `"quota":"held_requests"`) {
				t.Errorf("a refused follow: %s; want quota held_requests", b)
			}
			refused++
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			t.Fatalf("follow: %s", resp.Status)
		}
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatalf("follow's first line: %v", err)
		}
		held++
		go func() { defer resp.Body.Close(); io.Copy(io.Discard, br) }()
	}
	return held, refused
}

// TestRedServeAuditorStarvesAgents: an auditor's follow streams (a dashboard left
// open, or a hostile auditor credential) take the tenant's long requests; the
// tenant's agents must still exec, start and stop.
func TestRedServeAuditorStarvesAgents(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "watched", "bwrap")
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	lead := s.client(leadCert)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held, refused := holdFollows(t, ctx, lead, "https://"+s.addr, sess.ID, 40)
	if held > 32 || refused == 0 {
		t.Errorf("the auditor's 40 follows: %d held, %d refused; want at most 32 held", held, refused)
	}
	code, body, _ := do(t, acme.c, "POST", acme.base+"/v1/sessions/"+sess.ID+"/exec", acme.token,
		strings.NewReader(`{"argv":["echo","agent"]}`), "Content-Type", api.JSON)
	if code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Errorf("the agent's exec while the auditor holds %d follows: %d %s; want 200", held, code, body)
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
		t.Errorf("the agent's stop while the auditor holds %d follows: %d %s; want 200", held, code, body)
	}
}

// TestRedServeLongRequestsOutsideTheBound: a patch and a workspace delete lift the
// connection's deadlines to 15 minutes (a slow reader holds a patch that long), so
// they are long requests: past the tenant's bound they are 429, not one more
// connection held outside it.
func TestRedServeLongRequestsOutsideTheBound(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	if code, body := acme.upload(t, "idle", makeTar(t, tarEntry{name: "f", typ: tar.TypeReg, data: "x"})); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, body)
	}
	sess := acme.start(t, "busy", "bwrap")
	outcome(t, acme.exec(t, sess.ID, "sh", "-c", "echo changed > f"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	started := make(chan bool, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", acme.base+"/v1/sessions/"+sess.ID+"/exec",
				strings.NewReader(`{"argv":["sh","-c","echo up; exec sleep 600"]}`))
			req.Header.Set("Authorization", "Bearer "+acme.token)
			req.Header.Set("Content-Type", api.JSON)
			resp, err := acme.c.Do(req)
			if err != nil {
				started <- false
				return
			}
			defer resp.Body.Close()
			line, _ := bufio.NewReader(resp.Body).ReadString('\n')
			started <- resp.StatusCode == http.StatusOK && strings.Contains(line, `"fd":1`)
			io.Copy(io.Discard, resp.Body)
		}()
	}
	for range 32 {
		if !<-started {
			t.Fatal("an exec stream did not start")
		}
	}
	if code, body := acme.call(t, "GET", "/v1/sessions/"+sess.ID+"/patch", nil); code != http.StatusTooManyRequests || !strings.Contains(body, "held_requests") {
		t.Errorf("a patch past the tenant's 32 long requests: %d %.200s; want 429 held_requests", code, body)
	}
	if code, body := acme.call(t, "DELETE", "/v1/workspaces/idle", nil); code != http.StatusTooManyRequests || !strings.Contains(body, "held_requests") {
		t.Errorf("a workspace delete past the tenant's 32 long requests: %d %s; want 429 held_requests", code, body)
	}
	cancel()
	wg.Wait()
}

// TestRedServeUploadLinksOut: an upload may hold no symbolic link that leaves the
// workspace, whatever the links check each target alone: a link that is lexically
// inside where it was made, hard-linked to a shallower directory; and a target that
// climbs back out through another link of the archive.
func TestRedServeUploadLinksOut(t *testing.T) {
	s := startServe(t)
	acme := s.tcpClient("acme")
	root := filepath.Dir(s.file)
	secret := filepath.Join(root, "secret") // ROOT/secret; the workspace is ROOT/acme/workspaces/NAME
	mustWrite(t, secret, "SECRET")
	for _, c := range []struct {
		name    string
		entries []tarEntry
		entry   string
	}{
		{"a deep link hard-linked near the root", []tarEntry{
			{name: "a/b/c/l", typ: tar.TypeSymlink, link: "../../../secret"},
			{name: "h", typ: tar.TypeLink, link: "a/b/c/l"}}, `"h"`},
		{"a target climbing out through another link", []tarEntry{
			{name: "d1/d2/d3/l", typ: tar.TypeSymlink, link: "../../.."},
			{name: "esc", typ: tar.TypeSymlink, link: "d1/d2/d3/l/../../../secret"}}, `"esc"`},
		{"the other link made last", []tarEntry{
			{name: "esc", typ: tar.TypeSymlink, link: "d1/d2/d3/l/../../../secret"},
			{name: "d1/d2/d3/l", typ: tar.TypeSymlink, link: "../../.."}}, `"esc"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := filepath.Join(root, "acme", "workspaces", "links")
			code, body := acme.upload(t, "links", makeTar(t, c.entries...))
			if code == http.StatusCreated {
				defer os.RemoveAll(ws)
				for _, e := range c.entries {
					p := filepath.Join(ws, e.name)
					if got, err := os.ReadFile(p); err == nil && string(got) == "SECRET" {
						t.Errorf("%s in the uploaded workspace reads the host's %s", e.name, secret)
					}
				}
			}
			var e api.Error
			if code != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, c.entry) {
				t.Errorf("%d %s; want 400 naming %s", code, body, c.entry)
			}
		})
	}
}

// TestRedServeDownloadDeepTree: a sandbox makes a directory tree deeper than any
// upload may be. Packing it holds a descriptor per level: a tree tens of thousands
// deep would take every descriptor of the daemon (every tenant's requests fail while
// it is read). The download is bounded in depth as an upload is: cut short, never
// packed whole.
func TestRedServeDownloadDeepTree(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "deep", "bwrap")
	deep := "i=0; while [ $i -lt 300 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done"
	if _, errb, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", deep)); last.Result == nil || last.Result.ExitCode != 0 {
		t.Fatalf("making the tree: %q %+v", errb, last)
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	req, _ := http.NewRequest("GET", acme.base+"/v1/workspaces/deep", nil)
	req.Header.Set("Authorization", "Bearer "+acme.token)
	resp, err := acme.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return // refused outright: bounded
	}
	tr := tar.NewReader(resp.Body)
	depth := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Errorf("the download of a tree %d directories deep ended whole; want it cut past %d", depth, 256)
			return
		}
		if err != nil {
			return // cut short
		}
		depth = max(depth, strings.Count(strings.TrimSuffix(hdr.Name, "/"), "/")+1)
	}
}

// TestRedServeDownloadDuringUpload: a download while an upload still fills the
// workspace would be a whole archive of half a tree: 409, as while a session runs.
func TestRedServeDownloadDuringUpload(t *testing.T) {
	s := startServe(t)
	acme := s.tcpClient("acme")
	pr, pw := io.Pipe()
	tw := tar.NewWriter(pw)
	put := make(chan int, 1)
	go func() {
		code, body, _ := do(t, acme.c, "PUT", acme.base+"/v1/workspaces/half", acme.token, pr, "Content-Type", api.Tar)
		if code != http.StatusCreated {
			t.Errorf("the upload: %d %s", code, body)
		}
		put <- code
	}()
	tw.WriteHeader(&tar.Header{Name: "first", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("1"))
	tw.Flush()
	first := filepath.Join(filepath.Dir(s.file), "acme", "workspaces", "half", "first")
	waitFor(t, 30*time.Second, "the upload's first entry", func() bool { _, err := os.Stat(first); return err == nil })
	req, _ := http.NewRequest("GET", acme.base+"/v1/workspaces/half", nil)
	req.Header.Set("Authorization", "Bearer "+acme.token)
	resp, err := acme.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("download during the upload: %d %.300q", resp.StatusCode, b)
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("a download while the upload runs: %d (%d bytes); want 409", resp.StatusCode, len(b))
	}
	tw.WriteHeader(&tar.Header{Name: "second", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("2"))
	pw.CloseWithError(tw.Close())
	<-put
}

// TestRedServePatchOfAHugeLog: a sandbox grows its audit log by nearly a megabyte a
// command (an exec's argv is logged whole). A patch or a verify of that log must not
// read it into the daemon's memory: 32 of them at a time, of a log of gigabytes, would
// take the daemon (every tenant's sessions) down. The daemon's peak memory grows by
// much less than the log while they are read, and the patch is still whole. A show,
// one JSON document of the whole log, is refused past its bound.
func TestRedServePatchOfAHugeLog(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "huge", "bwrap")
	outcome(t, acme.exec(t, sess.ID, "sh", "-c", "echo first > a.txt"))
	// About 54 MiB of log: past a show's 32 MiB bound, and twice the most a patch may
	// raise the daemon's peak memory by (a log read whole raises it by at least its
	// size; one read a line at a time by a few of its megabyte lines, and what the
	// garbage collector has not yet taken back: 14 MiB once on a busy machine, past
	// the quarter this bound was). Two execs at a time, so that what
	// the daemon holds for them (their bodies) raises its peak less than a log read
	// whole would.
	big := strings.Repeat("A", 900<<10)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				outcome(t, acme.execReq(t, sess.ID, api.ExecRequest{Argv: []string{"true", big}}))
			}
		}()
	}
	wg.Wait()
	outcome(t, acme.exec(t, sess.ID, "sh", "-c", "echo last > z.txt"))
	fi, err := os.Stat(filepath.Join(filepath.Dir(s.file), "acme", "audit", sess.ID, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	before := peakRSS(t, s.cmd.Process.Pid)
	code, body := acme.call(t, "GET", "/v1/sessions/"+sess.ID+"/patch", nil)
	after := peakRSS(t, s.cmd.Process.Pid)
	t.Logf("a log of %d MiB: the daemon's peak memory %d -> %d MiB", fi.Size()>>20, before>>20, after>>20)
	if code != http.StatusOK || !strings.Contains(body, "+first") || !strings.Contains(body, "+last") {
		t.Errorf("the patch: %d %.300s; want both files' changes", code, body)
	}
	if grew := after - before; grew > fi.Size()/2 {
		t.Errorf("a patch of a %d MiB log raised the daemon's peak memory by %d MiB: it read the log into memory",
			fi.Size()>>20, grew>>20)
	}
	// A show answers the whole log as one document: past its bound it is 409, and the
	// export (streamed) still serves the log.
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	lead := s.client(leadCert)
	lead.Timeout = 3 * time.Minute // the export verifies the whole log first
	if code, body, _ := do(t, lead, "GET", "https://"+s.addr+"/v1/runs/"+sess.ID, "", nil); code != http.StatusConflict || !strings.Contains(body, "/export") {
		t.Errorf("a show of a %d MiB log: %d %.200s; want 409 naming the export", fi.Size()>>20, code, body)
	}
	// A verify (and the export's, and a dead session's collection) reads the log a
	// line at a time too; the bound is the patch's (half the log), for the same reason.
	before = peakRSS(t, s.cmd.Process.Pid)
	if code, body, _ := do(t, lead, "GET", "https://"+s.addr+"/v1/runs/"+sess.ID+"/verify", "", nil); code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Errorf("verify: %d %.300s", code, body)
	}
	if grew := peakRSS(t, s.cmd.Process.Pid) - before; grew > fi.Size()/2 {
		t.Errorf("a verify of a %d MiB log raised the daemon's peak memory by %d MiB: it read the log into memory",
			fi.Size()>>20, grew>>20)
	}
	resp, err := lead.Get("https://" + s.addr + "/v1/runs/" + sess.ID + "/export?format=ocsf")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.CopyN(io.Discard, resp.Body, 1<<20) // its start: the rest takes minutes
	if resp.StatusCode != http.StatusOK || err != nil || n == 0 {
		t.Errorf("the OCSF export: %s, %d bytes, %v", resp.Status, n, err)
	}
}

// peakRSS is process pid's peak resident memory, in bytes (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	return procStatus(t, pid, "VmHWM")
}

// TestRedServeDownloadPlantedLinks: a sandbox plants, in its workspace, links to the
// host's files, a FIFO and a socket, then its session stops. The download writes each
// link as a link (its target, never the file's content), leaves the FIFO and the
// socket out, and never blocks on the FIFO.
func TestRedServeDownloadPlantedLinks(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "planted", "bwrap")
	secret := filepath.Join(filepath.Dir(s.file), "secret")
	mustWrite(t, secret, "SECRET")
	plant := fmt.Sprintf("ln -s /etc/shadow shadow && ln -s %s secret && ln -s ../../../secret up && mkfifo fifo && "+
		"python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")' 2>/dev/null; echo ok > file", secret)
	if _, errb, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", plant)); last.Result == nil || last.Result.ExitCode != 0 {
		t.Fatalf("planting: %q %+v", errb, last)
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	got := acme.download(t, "planted")
	want := map[string]string{
		"shadow": "2 /etc/shadow ", "secret": "2 " + secret + " ", "up": "2 ../../../secret ", "file": "0  ok\n",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s in the download: %q; want %q", name, got[name], w)
		}
	}
	for name, v := range got {
		if strings.Contains(v, "SECRET") || strings.Contains(v, "root:") {
			t.Errorf("%s in the download holds a host file's content: %q", name, v)
		}
		if name == "fifo" || name == "sock" {
			t.Errorf("%s (a special file) is in the download", name)
		}
	}
}
