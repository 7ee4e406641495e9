package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestAuditFollowStreamsASession follows a live session's log into a unix socket a
// collector listens on: every line arrives as it is logged, the stream ends at the
// run.end seal with exit 0, and what the collector got is the log byte for byte.
func TestAuditFollowStreamsASession(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	sock := filepath.Join(shortTempDir(t), "collector.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, testutil.Cordon(t), "audit", "follow", "-o", "unix:"+sock, id)
	follow.Dir, follow.Env = w.ws, w.env
	var stderr strings.Builder
	follow.Stderr = &stderr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(conn)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	wantType := func(typ string) {
		t.Helper()
		for line := range lines {
			var rec struct{ Type string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("collector got %q: %v", line, err)
			}
			if rec.Type == typ {
				return
			}
		}
		t.Fatalf("stream ended before a %s line (stderr %s)", typ, stderr.String())
	}
	wantType("run.start")
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo streamed > f.txt"); r.code != 0 {
		t.Fatalf("exec: %v", r)
	}
	wantType("cmd.end") // while the session still runs
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	wantType("run.end")
	if err := follow.Wait(); err != nil {
		t.Fatalf("audit follow: %v: %s", err, stderr.String())
	}
	if _, ok := <-lines; ok {
		t.Error("lines after run.end")
	}
	// A sealed run is followed from its first line to its seal at once; ocsf to stdout.
	r := w.cordon("", "audit", "follow", "--format", "ocsf", id)
	if r.code != 0 || !strings.Contains(r.stdout, `"class_uid":`) {
		t.Fatalf("follow of a sealed run: %v", r)
	}
}

// TestAuditFollowRefusesBadLogs: a line that does not verify stops the stream before it
// (exit 1), and a crashed run's unsealed log ends with exit 1 instead of waiting forever.
func TestAuditFollowRefusesBadLogs(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("echo one; echo two"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	runs, err := audit.List(w.auditRoot())
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	path := filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"echo one; echo two"`, `"echo one; echo 2wo"`, 1)
	mustWrite(t, path, edited)
	r := w.cordon("", "audit", "follow", "last")
	if r.code != 1 || !strings.Contains(r.stderr, "NOT INTACT") || strings.Contains(r.stdout, "2wo") {
		t.Errorf("follow of an edited log: %v", r)
	}
	body := strings.TrimSuffix(string(data), "\n")
	mustWrite(t, path, body[:strings.LastIndex(body, "\n")+1]) // no run.end, no live owner
	done := make(chan result, 1)
	go func() { done <- w.cordon("", "audit", "follow", "last") }()
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("follow of a crashed run's log did not end")
	}
	if r.code != 1 || !strings.Contains(r.stderr, "no run.end seal") {
		t.Errorf("follow of an unsealed log: %v", r)
	}
}
