package integration

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// TestRedServeExecCapHoldsOutput: an agent asks an exec with a huge "cap" (refused
// past wire.MaxCap, so the largest there is) and its
// sandbox writes a flood to stdout. The cap keeps the head of each stream in the
// session's supervisor, a host process outside the sandbox's memory limit, so the
// bytes the sandbox writes must not become the supervisor's memory: the client reads
// every frame as it comes, and the supervisor's peak resident memory may grow by far
// less than the output.
func TestRedServeExecCapHoldsOutput(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "capflood", "bwrap")
	si, err := wire.Read(paths.Root(filepath.Join(s.tenantRoot("acme"), "run")).Sessions(), sess.ID)
	if err != nil {
		t.Fatalf("the session's record: %v", err)
	}
	// A cap past the protocol's maximum is refused before the session is asked; the
	// flood then asks the largest cap there is.
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/exec", api.ExecRequest{Argv: []string{"true"}, Cap: 1 << 40}); code != http.StatusBadRequest {
		t.Errorf("break: an exec with cap 2^40: %d %.200s; want 400 (past wire.MaxCap)", code, body)
	}
	before := peakRSS(t, si.PID)
	const flood = 96 << 20
	resp := acme.execResponse(t, sess.ID, api.ExecRequest{
		Argv: []string{"sh", "-c", "head -c 100663296 /dev/zero | tr '\\0' a"},
		Cap:  wire.MaxCap,
	})
	defer resp.Body.Close()
	var got int64
	var last wire.Frame
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var f wire.Frame
		if err := json.NewDecoder(bytes.NewReader(sc.Bytes())).Decode(&f); err != nil {
			t.Fatalf("a stream line: %v", err)
		}
		got += int64(len(f.Data))
		last = f
	}
	if last.Result == nil || last.Result.ExitCode != 0 {
		t.Fatalf("the flood did not finish: last frame %+v", last)
	}
	grown := peakRSS(t, si.PID) - before
	t.Logf("the sandbox wrote %d bytes; the client read %d; the supervisor's peak RSS grew by %d MiB", flood, got, grown>>20)
	if grown > 48<<20 {
		t.Errorf("break: the supervisor (pid %d, a host process) holds the sandbox's output: its peak RSS grew by %d MiB for %d MiB of output with cap=wire.MaxCap (runner/outcap keeps the head up to 4x cap in memory; server/sessions_exec.go validateExec bounds cap only below)",
			si.PID, grown>>20, flood>>20)
	}
}

// TestRedServeConcurrentExecsPastMemory: a session is charged its contract's
// limits.memory. Its agent runs three commands at once, each holding 60 MiB and
// waiting until all three hold theirs: the session as a whole must be held to its
// 96 MiB, so not all three can hold their memory at the same time. Once one of them
// has ended without, the test tells the others to give up (a file "over" in the
// workspace) rather than have them wait out their 20 s.
func TestRedServeConcurrentExecsPastMemory(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{Workspace: "mem", Backend: "bwrap",
		Contract: "version: 1\nlimits: {memory: 96MiB}\n"})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	var sess api.Session
	if err := json.Unmarshal([]byte(body), &sess); err != nil {
		t.Fatal(err)
	}
	_, _, last := outcome(t, acme.exec(t, sess.ID, "python3", "-c", "print(1)"))
	testutil.Require(t, last.Result != nil && last.Result.ExitCode == 0, "python3 in the sandbox (scripts/deps.sh installs it)")
	const prog = `import os, sys, time
b = b'a' * (60 << 20)
open('held-' + sys.argv[1], 'w').close()
for _ in range(400):
    if all(os.path.exists('held-%d' % i) for i in range(3)):
        print('all held', len(b)); sys.exit(0)
    if os.path.exists('over'):
        sys.exit(3)
    time.sleep(0.05)
sys.exit(3)
`
	type res struct {
		out  string
		code int
	}
	results := make(chan res, 3)
	for i := range 3 {
		go func() {
			frames := acme.execReq(t, sess.ID, api.ExecRequest{Argv: []string{"python3", "-c", prog, fmt.Sprint(i)}})
			out, errOut, last := outcome(t, frames)
			r := res{out: out + errOut, code: -1}
			if last.Result != nil {
				r.code = last.Result.ExitCode
			}
			results <- r
		}()
	}
	held := 0
	for range 3 {
		r := <-results
		t.Logf("exit %d: %q", r.code, r.out)
		if r.code == 0 && strings.Contains(r.out, "all held") {
			held++
		} else {
			mustWrite(t, filepath.Join(s.tenantRoot("acme"), "workspaces", "mem", "over"), "")
		}
	}
	if held == 3 {
		t.Errorf("break: three commands of one session held 180 MiB at once under limits.memory 96MiB: the session is charged 96 MiB of the tenant's memory quota but uses more")
	}
}

// vmRSS is process pid's resident memory now, in bytes (VmRSS).
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	return procStatus(t, pid, "VmRSS")
}

// TestRedServeTurnGrowsWithoutSweep: a session remembers every workspace path its
// commands changed until the agent's next sweep, in its supervisor (a host process,
// outside the sandbox's memory limit). Each command of a hostile sandbox deletes the
// files the previous one made and makes as many new ones, with long names: the
// workspace stays small, every command's diff stays within limits.diff, and the
// agent never sweeps. The supervisor's memory must not grow with the number of
// commands.
func TestRedServeTurnGrowsWithoutSweep(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "turn", "bwrap")
	si, err := wire.Read(paths.Root(filepath.Join(s.tenantRoot("acme"), "run")).Sessions(), sess.ID)
	if err != nil {
		t.Fatalf("the session's record: %v", err)
	}
	long := strings.Repeat("a", 200)
	dir := long + "/" + long + "/" + long + "/" + long
	churn := func(k int) {
		script := fmt.Sprintf(`rm -rf d; mkdir -p d/%s/r%d && cd d/%s/r%d && i=0; while [ $i -lt 8000 ]; do : > %s$i; i=$((i+1)); done`,
			dir, k, dir, k, strings.Repeat("b", 200))
		if _, errOut, last := outcome(t, acme.exec(t, sess.ID, "sh", "-c", script)); last.Result == nil || last.Result.ExitCode != 0 {
			t.Fatalf("command %d: %+v %s", k, last, errOut)
		}
	}
	churn(0)
	base := vmRSS(t, si.PID)
	const commands = 8 // 155 MiB of growth when the turn had no bound
	var half int64
	for k := 1; k <= commands; k++ {
		churn(k)
		if k == commands/2 {
			half = vmRSS(t, si.PID) - base
		}
	}
	grown := vmRSS(t, si.PID) - base
	code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/sweep", nil)
	var sw api.Sweep
	_ = json.Unmarshal([]byte(body), &sw)
	t.Logf("after %d commands of 8000 new ~1 KiB paths each: supervisor RSS +%d MiB (+%d MiB after %d); sweep %d, %d paths, %d bytes of answer: %.300s",
		commands, grown>>20, half>>20, commands/2, code, len(sw.Changed), len(body), body)
	if grown > 64<<20 {
		t.Errorf("break: the supervisor (pid %d) grew by %d MiB remembering the paths of %d commands until a sweep (runner/spill.go noteTurn: the turn's map has no bound)",
			si.PID, grown>>20, commands)
	}
	if code != http.StatusOK {
		t.Errorf("break: the sandbox's changes made the agent's sweep fail (%d %.200s): the turn's list of changed paths is lost to the agent (session/client.go simple: an answer line is at most 1 MiB)", code, body)
	} else if len(sw.Changed) < (commands+1)*8000 && sw.More == 0 {
		t.Errorf("break: the sweep listed %d of the %d paths the turn made and said nothing of the rest (want more > 0)", len(sw.Changed), (commands+1)*8000)
	}
}

// TestRedServeDownloadWideDirectory: a sandbox fills one directory of its workspace
// with 150000 FIFOs of long names (34 MiB of names: a peak 2.4 times that when the
// download read them whole), then its session stops. A download leaves FIFOs
// out and counts only what it packs against quotas.upload_entries, but it must not
// take the whole directory's names into the daemon's memory (the one process every
// tenant shares): its peak RSS may grow by far less than the names' bytes.
func TestRedServeDownloadWideDirectory(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "wide", "bwrap")
	const n, nameLen = 150000, 240
	prog := fmt.Sprintf(`import os
os.mkdir('d')
p = 'f' * %d
for i in range(%d):
    os.mkfifo('d/%%s%%07d' %% (p, i))
print('made')
`, nameLen-7, n)
	if out, errOut, last := outcome(t, acme.exec(t, sess.ID, "python3", "-c", prog)); last.Result == nil || last.Result.ExitCode != 0 || !strings.Contains(out, "made") {
		t.Fatalf("making the FIFOs: %+v %s %s", last, out, errOut)
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	pid := s.cmd.Process.Pid
	before := peakRSS(t, pid)
	req, _ := http.NewRequest("GET", acme.base+"/v1/workspaces/wide", nil)
	req.Header.Set("Authorization", "Bearer "+acme.token)
	resp, err := acme.c.Do(req)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	grown := peakRSS(t, pid) - before
	t.Logf("download: %d, %d bytes, %v; the daemon's peak RSS grew by %d MiB (the names: %d MiB)", resp.StatusCode, got, err, grown>>20, n*nameLen>>20)
	if grown > 32<<20 {
		t.Errorf("break: one download made the daemon (pid %d) take %d MiB for a directory of %d FIFOs it does not even pack (server/workspace/pack_linux.go dir: Readdirnames(-1) before any bound; skipped entries never count against upload_entries)",
			pid, grown>>20, n)
	}
}

// TestRedServeManyShowsOfABigLog: a show answers a run's whole log (up to 32 MiB) as
// one JSON document built in the daemon's memory, "a few times its size". A sandbox
// grows its log to just under the bound (an exec's argv is logged whole); the
// tenant's auditor then asks for it 12 times at once and reads none of the answers.
// Shows are not long requests (held.go), so nothing but the connection limits (128
// per address, 1024 in all) bounds how many the daemon builds at once: its peak
// memory must stay far below 12 copies.
func TestRedServeManyShowsOfABigLog(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "biglog", "bwrap")
	big := strings.Repeat("A", 900<<10)
	events := filepath.Join(s.tenantRoot("acme"), "audit", sess.ID, "events.jsonl")
	for range 60 {
		if fi, err := os.Stat(events); err == nil && fi.Size() > 28<<20 {
			break
		}
		outcome(t, acme.execReq(t, sess.ID, api.ExecRequest{Argv: []string{"true", big}}))
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	fi, err := os.Stat(events)
	if err != nil {
		t.Fatal(err)
	}
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	pool := x509.NewCertPool()
	pool.AddCert(s.ca.cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{leadCert}},
		MaxConnsPerHost: 0, MaxIdleConnsPerHost: 32, ReadBufferSize: 4 << 10}
	defer tr.CloseIdleConnections()
	lead := &http.Client{Transport: tr}
	pid := s.cmd.Process.Pid
	before := peakRSS(t, pid)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 12
	codes := make(chan int, n)
	for range n {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+s.addr+"/v1/runs/"+sess.ID, nil)
			resp, err := lead.Do(req)
			if err != nil {
				codes <- -1
				return
			}
			codes <- resp.StatusCode
			<-ctx.Done() // never read: the daemon holds the answer until its write times out
			resp.Body.Close()
		}()
	}
	ok := 0
	deadline := time.After(2 * time.Minute)
	for range n {
		select {
		case c := <-codes:
			if c == http.StatusOK {
				ok++
			}
		case <-deadline:
			t.Fatal("the shows did not answer in 2 minutes")
		}
	}
	grown := peakRSS(t, pid) - before
	t.Logf("a log of %d MiB; %d of %d shows answered 200 at once; the daemon's peak RSS grew by %d MiB", fi.Size()>>20, ok, n, grown>>20)
	if grown > 256<<20 {
		t.Errorf("break: %d unread shows of one %d MiB log took %d MiB of the daemon's memory (server/audit.go showRun is not a long request: no bound but the connections, 1024)",
			n, fi.Size()>>20, grown>>20)
	}
}

// ustarHeader is a 512-byte ustar header of type typ, name and size, its checksum set.
func ustarHeader(typ byte, name string, size int64) []byte {
	h := make([]byte, 512)
	copy(h[0:], name)
	copy(h[100:], "0000644\x00")
	copy(h[108:], "0000000\x00")
	copy(h[116:], "0000000\x00")
	copy(h[124:], fmt.Sprintf("%011o\x00", size))
	copy(h[136:], fmt.Sprintf("%011o\x00", 0))
	h[156] = typ
	copy(h[257:], "ustar\x0000")
	copy(h[148:], "        ")
	sum := 0
	for _, c := range h {
		sum += int(c)
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	return h
}

// padded is b padded with zeros to a whole number of 512-byte blocks.
func padded(b []byte) []byte {
	return append(b, make([]byte, (512-len(b)%512)%512)...)
}

// paxRecord is one PAX extended header record, "LEN key=value\n".
func paxRecord(k, v string) string {
	rec := " " + k + "=" + v + "\n"
	n := len(rec) + len(fmt.Sprint(len(rec)))
	if len(fmt.Sprint(n)) != len(fmt.Sprint(len(rec))) {
		n++ // the length's own digits made it one digit longer
	}
	return fmt.Sprint(n) + rec
}

// gnuSparseTar is an archive of one PAX (GNU 1.0) sparse file named name, of size
// bytes that are all a hole: its extended header, its header, a sparse map of no
// extents, the end of the archive.
func gnuSparseTar(name string, size int64) []byte {
	pax := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", fmt.Sprint(size))
	var b []byte
	b = append(b, ustarHeader('x', "PaxHeaders/"+name, int64(len(pax)))...)
	b = append(b, padded([]byte(pax))...)
	b = append(b, ustarHeader('0', "GNUSparseFile.0/"+name, 512)...)
	b = append(b, padded([]byte("0\n"))...)
	return append(b, make([]byte, 1024)...)
}

// TestRedServeSparseUploadLandsDense: an upload's sparse entry is charged its whole
// size against quotas.upload_bytes, but its holes must stay holes: 1.5 KiB of request
// must not make the daemon write hundreds of MiB of zeros to the tenant's disk (and
// through its image, the host's).
func TestRedServeSparseUploadLandsDense(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    quotas: {upload_bytes: 256MiB}\n")
	acme := s.tcpClient("acme")
	body := gnuSparseTar("hole", 256<<20)
	began := time.Now()
	code, got := acme.upload(t, "sparse", body)
	took := time.Since(began)
	if code != http.StatusCreated {
		t.Fatalf("upload of a sparse entry: %d %s", code, got)
	}
	fi, err := os.Stat(filepath.Join(s.tenantRoot("acme"), "workspaces", "sparse", "hole"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	t.Logf("a %d-byte request: %s in %v; the file is %d bytes, %d MiB allocated", len(body), got, took, st.Size, st.Blocks*512>>20)
	if st.Blocks*512 > 1<<20 {
		t.Errorf("break: a %d-byte upload made the daemon write %d MiB of zeros to the tenant's disk (server/workspace/unpack_linux.go: a sparse entry's holes are copied as zeros through budget, never seeked over)",
			len(body), st.Blocks*512>>20)
	}
}

// TestRedServeClaimsPastWorkspacesQuota: a claimed warm session's workspace is the
// tenant's for good and counts against its quotas.workspaces. A tenant at its quota
// (2 of 2, by upload) claims a warm session, stops it, and claims the refill, and so
// on: each claim must be refused past the quota (429 workspaces), or the tenant's
// workspaces grow without the bound every upload and cold start is held to.
func TestRedServeClaimsPastWorkspacesQuota(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServeWith(t, "    pools: [{name: default, size: 1, backend: bwrap}]\n    quotas: {sessions: 2, workspaces: 2}\n")
	stopPoolAtEnd(t, s)
	acme := s.tcpClient("acme")
	for _, n := range []string{"a", "b"} {
		if code, body := acme.upload(t, n, makeTar(t, tarEntry{name: "f", typ: tar.TypeReg, data: "x"})); code != http.StatusCreated {
			t.Fatalf("upload %s: %d %s", n, code, body)
		}
	}
	if code, body := acme.upload(t, "c", makeTar(t, tarEntry{name: "f", typ: tar.TypeReg, data: "x"})); code != http.StatusTooManyRequests {
		t.Fatalf("an upload past the workspaces quota: %d %s; want 429", code, body)
	}
	claimed := 0
	for range 2 {
		s.waitClaimable(t, 2*time.Minute, "acme", "default", 1)
		code, body := acme.call(t, "POST", "/v1/sessions", api.StartRequest{})
		if code != http.StatusCreated {
			t.Logf("a claim at the quota: %d %s", code, body)
			break
		}
		var sess api.Session
		if json.Unmarshal([]byte(body), &sess) != nil || !sess.Warm {
			t.Fatalf("claim: %d %s; want a warm session", code, body)
		}
		claimed++
		if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
			t.Fatalf("stop: %d %s", code, body)
		}
	}
	names := workspaceNames(t, acme)
	t.Logf("claims at the quota: %d; the tenant's workspaces: %q", claimed, names)
	if len(names) > 2 {
		t.Errorf("break: a tenant with quotas.workspaces 2 holds %d workspaces %q: claims from a warm pool are never held to the quota (server/sessions_start.go startClaimed asks quota.Room: audit and disk only)",
			len(names), names)
	}
}

// cpuTime is process pid's user and system CPU time so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// TestRedServeRunListReadsEveryLog: GET /v1/runs lists the tenant's runs. A sandbox
// grows its one run's log to 28 MiB; the tenant's auditor then lists its runs 16
// times at once. A listing is not a long request (held.go) and nothing caches it, so
// its cost must not be the bytes of every log: the daemon's CPU for 16 listings of one
// run must stay small.
func TestRedServeRunListReadsEveryLog(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "listlog", "bwrap")
	big := strings.Repeat("A", 900<<10)
	events := filepath.Join(s.tenantRoot("acme"), "audit", sess.ID, "events.jsonl")
	for range 60 {
		if fi, err := os.Stat(events); err == nil && fi.Size() > 28<<20 {
			break
		}
		outcome(t, acme.execReq(t, sess.ID, api.ExecRequest{Argv: []string{"true", big}}))
	}
	if code, body := acme.call(t, "POST", "/v1/sessions/"+sess.ID+"/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	leadCert, _, _ := s.ca.issue(t, "lead.acme", false)
	lead := s.client(leadCert)
	lead.Timeout = 2 * time.Minute
	pid := s.cmd.Process.Pid
	before := cpuTime(t, pid)
	began := time.Now()
	const n = 16
	codes := make(chan int, n)
	for range n {
		go func() {
			resp, err := lead.Get("https://" + s.addr + "/v1/runs")
			if err != nil {
				codes <- -1
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	ok := 0
	for range n {
		if <-codes == http.StatusOK {
			ok++
		}
	}
	spent := cpuTime(t, pid) - before
	t.Logf("%d of %d listings of 1 run (a 28 MiB log) answered 200 in %v; the daemon spent %v of CPU", ok, n, time.Since(began), spent)
	if spent > 2*time.Second {
		t.Errorf("break: %d listings of one run cost the daemon %v of CPU: audit.List reads every line of every log of the tenant's audit root (server/audit.go listRuns, audit/read.go summarize) on each request, outside the long-request bound",
			n, spent)
	}
}
