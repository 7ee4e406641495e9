package integration

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
)

// tarEntry is one entry of a tar a test uploads.
type tarEntry struct {
	name, link, data string
	typ              byte
	mode             int64
}

func makeTar(t *testing.T, es ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if e.typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3 // /dev/null
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			io.WriteString(tw, e.data)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// upload PUTs body as the workspace name and returns the status and the answer.
func (a apiClient) upload(t *testing.T, name string, body []byte) (int, string) {
	t.Helper()
	code, got, _ := do(t, a.c, "PUT", a.base+"/v1/workspaces/"+name, a.token, bytes.NewReader(body), "Content-Type", api.Tar)
	return code, got
}

// download GETs the workspace name as a tar and returns its entries: name to
// "TYPE LINK DATA".
func (a apiClient) download(t *testing.T, name string) map[string]string {
	t.Helper()
	req, _ := http.NewRequest("GET", a.base+"/v1/workspaces/"+name, nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != api.Tar {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("download %s: %d %s %s", name, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	got := map[string]string{}
	tr := tar.NewReader(resp.Body)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("download %s: %v", name, err)
		}
		data, _ := io.ReadAll(tr)
		got[hdr.Name] = string(hdr.Typeflag) + " " + hdr.Linkname + " " + string(data)
	}
}

// gitServer serves a bare repository holding one commit (hello.txt) over git's dumb
// HTTP protocol on 127.0.0.2, and returns its URL, the commit, and the port.
func gitServer(t *testing.T) (url, commit, port string) {
	t.Helper()
	dir := t.TempDir()
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "repo.git")
	git := func(d string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", d}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	mustWrite(t, filepath.Join(work, "hello.txt"), "hello from git\n")
	git(dir, "init", "-q", "-b", "main", work)
	git(work, "add", "hello.txt")
	git(work, "commit", "-q", "-m", "one")
	commit = git(work, "rev-parse", "HEAD")
	git(dir, "clone", "-q", "--bare", work, bare)
	git(bare, "update-server-info")
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.StripPrefix("/repo.git/", http.FileServer(http.Dir(bare)))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return "http://127.0.0.2:" + port + "/repo.git", commit, port
}

// TestServeWorkspace drives the workspaces the server owns through the real daemon:
// an upload a session then reads, its patch and its download; hostile tars refused
// with nothing written outside; a git clone at a pinned commit through the session's
// egress rules, and one the rules refuse; another tenant's workspace 404; the
// workspaces quota.
func TestServeWorkspace(t *testing.T) {
	testutil.RequireBwrap(t)
	_, err := exec.LookPath("git")
	testutil.Require(t, err == nil, "git, for a session started from a git source")
	url, commit, port := gitServer(t)
	base := filepath.Join(shortTempDir(t), "base.yaml")
	mustWrite(t, base, "version: 1\nnetwork:\n  allow:\n    - {cidr: 127.0.0.2/32, ports: ["+port+"], why: the test's git server}\n")
	s := startServeWith(t, "    base_contract: "+base+"\n    quotas: {workspaces: 8, upload_bytes: 64KiB, upload_entries: 20}\n")
	stopSessionsAtEnd(t, s)
	a := s.tcpClient("acme")
	t.Run("an upload is the session's workspace; patch and download", func(t *testing.T) { serveWorkspaceUpload(t, s, a) })
	t.Run("hostile tars are refused, nothing written outside", func(t *testing.T) { serveWorkspaceHostile(t, s, a) })
	t.Run("a git clone at a pinned commit, through the egress rules", func(t *testing.T) { serveWorkspaceGit(t, s, a, url, commit) })
	t.Run("another tenant's workspace is 404", func(t *testing.T) { serveWorkspaceCrossing(t, s, a) })
	t.Run("the workspaces quota", func(t *testing.T) { serveWorkspaceQuota(t, a) })
}

func serveWorkspaceUpload(t *testing.T, s *served, a apiClient) {
	up := makeTar(t,
		tarEntry{name: "hello.txt", typ: tar.TypeReg, data: "hi from a tar\n"},
		tarEntry{name: "sub/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "sub/run.sh", typ: tar.TypeReg, data: "#!/bin/sh\necho ran\n", mode: 0o755},
		tarEntry{name: "sub/link", typ: tar.TypeSymlink, link: "../hello.txt"},
	)
	code, body := a.upload(t, "up1", up)
	if code != http.StatusCreated || !strings.Contains(body, `"name":"up1"`) || !strings.Contains(body, `"entries":4`) {
		t.Fatalf("upload: %d %s; want 201 with 4 entries", code, body)
	}
	onDisk := filepath.Join(filepath.Dir(s.file), "acme", "workspaces", "up1", "hello.txt")
	if st, err := os.Lstat(onDisk); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("%s: %v; want it owned by the workspace's owner (root)", onDisk, err)
	}
	if code, body := a.upload(t, "up1", up); code != http.StatusConflict {
		t.Errorf("a second upload into a full workspace: %d %s; want 409", code, body)
	}
	sess := a.start(t, "up1", "bwrap")
	out, _, last := outcome(t, a.exec(t, sess.ID, "cat", "hello.txt", "sub/link"))
	if out != "hi from a tar\nhi from a tar\n" || last.Result == nil || last.Result.ExitCode != 0 {
		t.Errorf("cat in the session: %q, %+v", out, last)
	}
	out, _, _ = outcome(t, a.exec(t, sess.ID, "sub/run.sh"))
	if out != "ran\n" {
		t.Errorf("sub/run.sh: %q; want its mode kept", out)
	}
	outcome(t, a.exec(t, sess.ID, "sh", "-c", "echo made > made.txt && echo more >> hello.txt"))
	code, patch, hdr := do(t, a.c, "GET", a.base+"/v1/sessions/"+sess.ID+"/patch", a.token, nil)
	if code != 200 || hdr.Get("Content-Type") != api.Patch || hdr.Get("X-Cordon-Patch-Incomplete") != "0" ||
		!strings.Contains(patch, "+made") || !strings.Contains(patch, "b/made.txt") || !strings.Contains(patch, "+more\n") {
		t.Errorf("patch: %d %v\n%s\nwant the two changes", code, hdr, patch)
	}
	if code, body := a.call(t, "DELETE", "/v1/workspaces/up1", nil); code != http.StatusConflict {
		t.Errorf("delete with a session in it: %d %s; want 409", code, body)
	}
	a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
	got := a.download(t, "up1")
	want := map[string]string{
		"hello.txt": "0  hi from a tar\nmore\n", "made.txt": "0  made\n", "sub/": "5  ",
		"sub/run.sh": "0  #!/bin/sh\necho ran\n", "sub/link": "2 ../hello.txt ",
	}
	if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
		t.Errorf("download:\n%v\nwant\n%v", sorted(got), sorted(want))
	}
	// The round trip: the download uploads as it is, and downloads the same.
	var b bytes.Buffer
	req, _ := http.NewRequest("GET", a.base+"/v1/workspaces/up1", nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(&b, resp.Body)
	resp.Body.Close()
	if code, body := a.upload(t, "up2", b.Bytes()); code != http.StatusCreated {
		t.Fatalf("uploading a download: %d %s", code, body)
	}
	if again := a.download(t, "up2"); fmt.Sprint(sorted(again)) != fmt.Sprint(sorted(got)) {
		t.Errorf("round trip: %v; want %v", sorted(again), sorted(got))
	}
	code, body = a.call(t, "GET", "/v1/workspaces", nil)
	if code != 200 || !strings.Contains(body, `{"name":"up1"}`) || !strings.Contains(body, `"quota":8`) {
		t.Errorf("list: %d %s", code, body)
	}
	for _, n := range []string{"up1", "up2"} {
		if code, body := a.call(t, "DELETE", "/v1/workspaces/"+n, nil); code != 200 {
			t.Errorf("delete %s: %d %s", n, code, body)
		}
	}
	if code, _ := a.call(t, "GET", "/v1/workspaces/up1", nil); code != http.StatusNotFound {
		t.Errorf("a deleted workspace: %d; want 404", code)
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// serveWorkspaceHostile: each hostile tar is a 4xx naming its entry; the workspace
// it named is gone after it, and nothing outside the workspace root changed.
func serveWorkspaceHostile(t *testing.T, s *served, a apiClient) {
	root := filepath.Dir(s.file)
	secret := filepath.Join(root, "secret")
	mustWrite(t, secret, "SECRET")
	evil := filepath.Join(os.TempDir(), fmt.Sprintf("cordon-evil-%d", os.Getpid()))
	before := listTree(t, root)
	big := strings.Repeat("x", 40<<10)
	for _, c := range []struct {
		name    string
		entries []tarEntry
		code    int
		entry   string
	}{
		{"dot-dot", []tarEntry{{name: "../../secret", typ: tar.TypeReg, data: "pwned"}}, 400, `"../../secret"`},
		{"absolute", []tarEntry{{name: evil, typ: tar.TypeReg, data: "pwned"}}, 400, `"` + evil + `"`},
		{"symlink out", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: "../../secret"}}, 400, `"l"`},
		{"symlink, then a file through it", []tarEntry{
			{name: "d/", typ: tar.TypeDir}, {name: "l", typ: tar.TypeSymlink, link: "d"},
			{name: "l/f", typ: tar.TypeReg, data: "x"}}, 400, `"l/f"`},
		{"hard link out", []tarEntry{{name: "h", typ: tar.TypeLink, link: "../../secret"}}, 400, `"h"`},
		{"hard link absolute", []tarEntry{{name: "h", typ: tar.TypeLink, link: secret}}, 400, `"h"`},
		{"device", []tarEntry{{name: "null", typ: tar.TypeChar}}, 400, `"null": a device`},
		{"fifo", []tarEntry{{name: "p", typ: tar.TypeFifo}}, 400, `"p": a FIFO`},
		{"setuid", []tarEntry{{name: "su", typ: tar.TypeReg, data: "x", mode: 0o4755}}, 400, `"su"`},
		{"huge", []tarEntry{{name: "a", typ: tar.TypeReg, data: big}, {name: "b", typ: tar.TypeReg, data: big}}, 413, `"b"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := a.upload(t, "hostile", makeTar(t, c.entries...))
			var e api.Error
			if code != c.code || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, c.entry) {
				t.Errorf("%d %s; want %d naming %s", code, body, c.code, c.entry)
			}
			if _, err := os.Lstat(filepath.Join(root, "acme", "workspaces", "hostile")); err == nil {
				t.Error("the refused upload's workspace is left")
			}
		})
	}
	code, body, _ := do(t, a.c, "PUT", a.base+"/v1/workspaces/hostile", a.token, strings.NewReader(strings.Repeat("junk", 300)), "Content-Type", api.Tar)
	if code != 400 {
		t.Errorf("junk: %d %s; want 400", code, body)
	}
	req, _ := http.NewRequest("PUT", a.base+"/v1/workspaces/hostile", strings.NewReader("x"))
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", api.Tar)
	req.ContentLength = 1 << 40
	if resp, err := a.c.Do(req); err == nil {
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a declared length of 1TiB: %d; want 413", resp.StatusCode)
		}
		resp.Body.Close()
	}
	// A body of no declared length (chunked) past the bound, in PAX records the tar
	// reader reads and ignores (900 KiB an entry, under its own 1 MiB bound).
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		for i := range 3 {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d", i), Typeflag: tar.TypeReg, Mode: 0o644,
				PAXRecords: map[string]string{"comment": strings.Repeat("c", 900<<10)}, Format: tar.FormatPAX})
		}
		pw.CloseWithError(tw.Close())
	}()
	code, body, _ = do(t, a.c, "PUT", a.base+"/v1/workspaces/hostile", a.token, pr, "Content-Type", api.Tar)
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("a streamed body past the bound: %d %s; want 413", code, body)
	}
	if got, err := os.ReadFile(secret); err != nil || string(got) != "SECRET" {
		t.Errorf("the secret: %q, %v", got, err)
	}
	if st, _ := os.Stat(secret); st.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Error("the secret was hard-linked")
	}
	assertAbsent(t, evil)
	if after := listTree(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the server's directory changed:\nbefore %v\nafter  %v", before, after)
	}
}

// listTree lists root's entries, but for the tenants' run and audit roots (sessions
// of other subtests write there).
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if fi.IsDir() && (filepath.Base(p) == "run" || filepath.Base(p) == "audit") {
			return filepath.SkipDir
		}
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}

func serveWorkspaceGit(t *testing.T, s *served, a apiClient, url, commit string) {
	code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "cloned", Backend: "bwrap", Git: &api.GitSource{URL: url, Commit: commit}})
	var sess api.Session
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &sess) != nil {
		t.Fatalf("start with git: %d %s", code, body)
	}
	out, _, _ := outcome(t, a.exec(t, sess.ID, "cat", "hello.txt"))
	if out != "hello from git\n" {
		t.Errorf("hello.txt: %q", out)
	}
	// The repository stays in the sandbox's /tmp: a sandbox may not make the
	// workspace's own .git.
	out, _, _ = outcome(t, a.exec(t, sess.ID, "git", "--git-dir=/tmp/cordon-clone.git", "rev-parse", "HEAD"))
	if strings.TrimSpace(out) != commit {
		t.Errorf("HEAD %q; want %s", out, commit)
	}
	// The clone is in the session's audit log, as its first commands.
	a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
	run := auditRunOf(t, s, sess.ID)
	if !strings.Contains(run, `"clone","--bare","--quiet","--","`+url) {
		t.Errorf("the clone is not a command of the session's log:\n%s", run)
	}

	// A commit the repository does not have: refused, the session stopped.
	missing := strings.Repeat("ab", 20)
	code, body = a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "cloned2", Backend: "bwrap", Git: &api.GitSource{URL: url, Commit: missing}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "stopped") {
		t.Errorf("a missing commit: %d %s; want 422", code, body)
	}
	// A URL the egress rules do not allow: the denial in the answer.
	other, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	denied := "http://" + other.Addr().String() + "/repo.git"
	code, body = a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "cloned3", Backend: "bwrap", Git: &api.GitSource{URL: denied, Commit: commit}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "egress denied") || !strings.Contains(body, other.Addr().String()) {
		t.Errorf("a URL the contract does not allow: %d %s; want 422 with the denial", code, body)
	}
	t.Logf("denied: %s", body)
	for _, bad := range []api.GitSource{
		{URL: "ext::sh -c touch% /tmp/pwned", Commit: commit},
		{URL: "file:///etc", Commit: commit},
		{URL: "--upload-pack=touch /tmp/pwned", Commit: commit},
		{URL: url, Commit: "main"},
	} {
		if code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Backend: "bwrap", Git: &bad}); code != http.StatusBadRequest {
			t.Errorf("git %+v: %d %s; want 400", bad, code, body)
		}
	}
	for _, n := range []string{"cloned", "cloned2", "cloned3"} {
		a.call(t, "DELETE", "/v1/workspaces/"+n, nil)
	}
}

// auditRunOf is the events of run id as the tenant's log holds them, read on disk.
func auditRunOf(t *testing.T, s *served, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(s.file), "acme", "audit", id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func serveWorkspaceCrossing(t *testing.T, s *served, a apiClient) {
	if code, body := a.upload(t, "mine", makeTar(t, tarEntry{name: "f", typ: tar.TypeReg, data: "acme's"})); code != 201 {
		t.Fatalf("upload: %d %s", code, body)
	}
	sess := a.start(t, "mine", "bwrap")
	outcome(t, a.exec(t, sess.ID, "sh", "-c", "echo x > g"))
	beta := s.tcpClient("beta")
	n := 0
	for _, rt := range api.Routes {
		if !strings.Contains(rt.Path, "{name}") {
			continue
		}
		n++
		path := strings.Replace(rt.Path, "{name}", "mine", 1)
		if rt.Method == "PUT" {
			continue // below: names are the tenant's own, beta's PUT makes beta's
		}
		if code, body := beta.call(t, rt.Method, path, nil); code != http.StatusNotFound {
			t.Errorf("beta %s %s: %d %s; want 404", rt.Method, path, code, body)
		}
	}
	if n < 3 {
		t.Errorf("%d workspace routes with a name; want at least 3", n)
	}
	if code, body := beta.upload(t, "mine", makeTar(t, tarEntry{name: "f", typ: tar.TypeReg, data: "beta's"})); code != 201 {
		t.Errorf("beta PUT /v1/workspaces/mine: %d %s; want 201, a workspace of beta's", code, body)
	}
	if code, body := a.call(t, "GET", "/v1/workspaces/mine", nil); code != http.StatusConflict || !strings.Contains(body, sess.ID) {
		t.Errorf("a download while a session runs: %d %s; want 409 naming it", code, body)
	}
	a.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil)
	if got := a.download(t, "mine"); got["f"] != "0  acme's" || got["g"] != "0  x\n" {
		t.Errorf("acme's workspace after beta's requests: %v", got)
	}
	if got := beta.download(t, "mine"); got["f"] != "0  beta's" || len(got) != 1 {
		t.Errorf("beta's own workspace mine: %v", got)
	}
	beta.call(t, "DELETE", "/v1/workspaces/mine", nil)
	if code, body := beta.call(t, "GET", "/v1/workspaces", nil); code != 200 || strings.Contains(body, "mine") {
		t.Errorf("beta's list: %d %s; want no acme workspace", code, body)
	}
	a.call(t, "DELETE", "/v1/workspaces/mine", nil)
	for _, bad := range []string{"..", ".hidden", "a%2Fb", "warm-0123456789abcdef", strings.Repeat("a", 64)} {
		if code, body := a.call(t, "GET", "/v1/workspaces/"+bad, nil); code != http.StatusNotFound {
			t.Errorf("GET /v1/workspaces/%s: %d %s; want 404", bad, code, body)
		}
	}
}

// serveWorkspaceQuota: past quotas.workspaces a new workspace is 429 naming the
// quota, by upload and by start; a delete makes room.
func serveWorkspaceQuota(t *testing.T, a apiClient) {
	var list api.WorkspaceList
	_, body := a.call(t, "GET", "/v1/workspaces", nil)
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	empty := makeTar(t)
	for i := len(list.Workspaces); i < list.Quota; i++ {
		if code, body := a.upload(t, fmt.Sprintf("q%d", i), empty); code != 201 {
			t.Fatalf("upload %d of %d: %d %s", i, list.Quota, code, body)
		}
	}
	code, body, hdr := do(t, a.c, "PUT", a.base+"/v1/workspaces/one-more", a.token, bytes.NewReader(empty), "Content-Type", api.Tar)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"quota":"workspaces"`) || hdr.Get("Retry-After") == "" {
		t.Errorf("past the quota: %d %s %v; want 429 naming workspaces", code, body, hdr)
	}
	if code, body := a.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "one-more", Backend: "bwrap"}); code != http.StatusTooManyRequests || !strings.Contains(body, `"quota":"workspaces"`) {
		t.Errorf("a start past the quota: %d %s; want 429", code, body)
	}
	a.call(t, "DELETE", fmt.Sprintf("/v1/workspaces/q%d", list.Quota-1), nil)
	if code, body := a.upload(t, "one-more", empty); code != 201 {
		t.Errorf("after a delete: %d %s; want 201", code, body)
	}
}
