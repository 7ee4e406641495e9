package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

func (w *world) auditRoot() string {
	return filepath.Join(w.home, ".local", "state", "cordon", "runs")
}

func TestAuditRecordsTheExactDiff(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "a.txt"), "one\ntwo\nthree\n")
	mustWrite(t, filepath.Join(w.ws, "gone.txt"), "bye\n")
	mustWrite(t, filepath.Join(w.ws, "old.txt"), "moving\n")
	r := w.sh("sed -i 's/two/TWO/' a.txt && rm gone.txt && mv old.txt new.txt && " +
		"printf 'made\\n' > made.txt && printf '\\000\\001\\002binary' > bin.dat && chmod +x made.txt")
	if r.code != 0 {
		t.Fatalf("command failed: %v", r)
	}
	show := w.cordon("", "audit", "show", "--diff", "last")
	if show.code != 0 {
		t.Fatalf("audit show: %v", show)
	}
	for _, want := range []string{
		"-two", "+TWO", // the edit
		"gone.txt", "-bye", // the deletion
		"new.txt", // the rename
		"+made",   // the new file
		"bin.dat", // the binary file, by size and hash
	} {
		assertContains(t, "audit show --diff", show.stdout, want)
	}
	var diff audit.FSDiff
	for _, rec := range lastRun(t, w) {
		if rec.Type == "fs.diff" {
			if err := rec.DecodeBody(&diff); err != nil {
				t.Fatal(err)
			}
		}
	}
	ops := map[string]string{}
	for _, c := range diff.Changes {
		ops[c.Path] = c.Op + "/" + c.Kind
	}
	want := map[string]string{
		"a.txt": "modified/text", "gone.txt": "deleted/text", "new.txt": "renamed/text",
		"made.txt": "added/text", "bin.dat": "added/binary",
	}
	for p, op := range want {
		if ops[p] != op {
			t.Errorf("%s: got %q, want %q (all: %v)", p, ops[p], op, ops)
		}
	}
	if v := w.cordon("", "audit", "verify", "last"); v.code != 0 || !strings.Contains(v.stdout, "intact and sealed") {
		t.Errorf("verify: %v", v)
	}
}

func TestAuditNeverRunsWorkspaceGit(t *testing.T) {
	w := newWorld(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	mustWrite(t, filepath.Join(w.ws, ".git", "config"), "[core]\n\tfsmonitor = touch "+marker+"\n[filter \"evil\"]\n\tclean = touch "+marker+"\n\tsmudge = touch "+marker+"\n[diff \"evil\"]\n\ttextconv = touch "+marker+"\n")
	mustWrite(t, filepath.Join(w.ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(w.ws, ".gitattributes"), "* filter=evil diff=evil\n")
	hook := filepath.Join(w.ws, ".git", "hooks", "post-checkout")
	mustWrite(t, hook, "#!/bin/sh\ntouch "+marker+"\n")
	os.Chmod(hook, 0o755)
	mustWrite(t, filepath.Join(w.ws, "f.txt"), "x\n")
	before := treeDigest(t, filepath.Join(w.ws, ".git"))
	r := w.sh("echo y >> f.txt")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("something in the workspace's .git was executed")
	}
	if after := treeDigest(t, filepath.Join(w.ws, ".git")); after != before {
		t.Error("the workspace's .git changed")
	}
	show := w.cordon("", "audit", "show", "--diff", "last")
	assertContains(t, "diff", show.stdout, "+y")
}

func treeDigest(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			data, _ := os.ReadFile(p)
			b.WriteString(p + fi.Mode().String() + fi.ModTime().String() + string(data))
		}
		return nil
	})
	return b.String()
}

func TestAuditTamperingDetected(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("echo hello; echo world > w.txt"); r.code != 0 {
		t.Fatal(r)
	}
	runs, _ := audit.List(w.auditRoot())
	log := filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile)
	orig, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(orig, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty tail after the last newline
	cases := map[string][]byte{
		"edited":    bytes.Replace(orig, []byte(`"exit_code":0`), []byte(`"exit_code":1`), 1),
		"deleted":   bytes.Join(append(append([][]byte{}, lines[:1]...), lines[2:]...), nil),
		"reordered": bytes.Join(append([][]byte{lines[0], lines[2], lines[1]}, lines[3:]...), nil),
		"truncated": orig[:len(orig)-10],
		"no seal":   bytes.Join(lines[:len(lines)-1], nil),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if bytes.Equal(data, orig) {
				t.Fatal("the tampering changed nothing")
			}
			os.WriteFile(log, data, 0o600)
			defer os.WriteFile(log, orig, 0o600)
			r := w.cordon("", "audit", "verify", runs[0].ID)
			if r.code != 1 || !strings.Contains(r.stdout, "NOT INTACT") {
				t.Errorf("tampering (%s) not detected: %v", name, r)
			}
		})
	}
	if r := w.cordon("", "audit", "verify", runs[0].ID); r.code != 0 {
		t.Errorf("restored log: %v", r)
	}
}

// startLongRun starts `cordon run -- sleep 321` in the background and returns once the
// command runs (its cmd.start is in the newest log); the caller kills it.
func (w *world) startLongRun() *exec.Cmd {
	w.t.Helper()
	cmd := exec.Command(testutil.Cordon(w.t), "run", "--", "sleep", "321")
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if runs, _ := audit.List(w.auditRoot()); len(runs) > 0 && runs[0].Commands > 0 {
			return cmd
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	w.t.Fatal("the background run never logged its command")
	return nil
}

func TestAuditKilledCordonLeavesTruncatedLog(t *testing.T) {
	w := newWorld(t)
	cmd := w.startLongRun()
	cmd.Process.Kill()
	cmd.Wait()
	r := w.cordon("", "audit", "verify", "last")
	if r.code != 1 || !strings.Contains(r.stdout, "NOT INTACT") {
		t.Fatalf("a killed run's log must not verify as intact: %v", r)
	}
	ls := w.cordon("", "audit", "ls")
	assertContains(t, "audit ls", ls.stdout, "unsealed")
}

func TestAuditRootProblemsRefuseTheRun(t *testing.T) {
	w := newWorld(t)
	r := w.cordon("", "run", "--audit-dir", filepath.Join(w.ws, "logs"), "--", "true")
	if r.code != 125 {
		t.Fatalf("audit root inside the workspace: want 125, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "inside the workspace")
	blocker := filepath.Join(t.TempDir(), "file")
	mustWrite(t, blocker, "not a directory")
	r = w.cordon("", "run", "--audit-dir", filepath.Join(blocker, "runs"), "--", "sh", "-c", "echo ran > ran.txt")
	if r.code != 125 {
		t.Fatalf("unwritable audit root: want 125, got %v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
}

func TestAuditRedactsCallerSecrets(t *testing.T) {
	w := newWorld(t)
	const token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	// The command line itself carries the caller's token (an agent pasting it).
	r := w.cordon("", "run", "--", "echo", token)
	if r.code != 0 {
		t.Fatal(r)
	}
	runs, _ := audit.List(w.auditRoot())
	data, _ := os.ReadFile(filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile))
	if bytes.Contains(data, []byte(token)) || bytes.Contains(data, []byte("aws-secret-value-123")) {
		t.Fatal("a caller secret is in the audit log")
	}
	assertContains(t, "log", string(data), "[REDACTED:GITHUB_TOKEN]")
}

// TestAuditLogNeverVisible: even with the whole home readable, the audit root (and
// cordon's run directories) stay hidden from the sandbox, so it cannot tamper with the
// record of what it did.
func TestAuditLogNeverVisible(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("true"); r.code != 0 { // leaves a log under ~/.local/state/cordon/runs
		t.Fatal(r)
	}
	w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", \"~\"]\n")
	root := filepath.Join(w.home, ".local", "state", "cordon")
	r := w.sh("ls -A " + root + " 2>&1; echo x >> " + root + "/runs/x 2>&1; ls /run/cordon/runs 2>&1; cat " + w.home + "/notes.txt")
	assertContains(t, "home is readable", r.stdout, "home notes")
	if strings.Contains(r.stdout, "runs\n") || strings.Contains(r.stdout, "events.jsonl") {
		t.Fatalf("the audit root is visible inside: %v", r)
	}
	assertContains(t, "audit root", r.stdout, "Permission denied")
	if v := w.cordon("", "audit", "verify", "last"); v.code != 0 {
		t.Errorf("the log was touched: %v", v)
	}
}

// TestRedSummaryConcealedByTheWorkload (red team): on a terminal the
// command's output and cordon's end-of-run lines share stderr, and cordon writes its
// lines after whatever state the command left the terminal in. A command that ends
// with ESC[8m (conceal; or black on black, ESC[30;40m) makes every following
// "cordon: monitor alert" line invisible, and the person never sees the alert. cordon
// should reset the attributes (ESC[0m, and start a new line) before its own lines when
// stderr is a terminal.
func TestRedSummaryConcealedByTheWorkload(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := exec.LookPath("script")
	testutil.Require(t, err == nil, "script(1) (bsdutils) gives cordon a terminal")
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, cat]}\n")
	inner := testutil.Cordon(t) + ` run -- sh -c 'cat /etc/shadow 2>/dev/null; printf "\033[8m" >&2'`
	cmd := exec.Command("script", "-qec", inner, "/dev/null")
	cmd.Dir, cmd.Env = w.ws, w.env
	out, _ := cmd.CombinedOutput()
	s := string(out)
	alert := strings.Index(s, "cordon: monitor alert")
	if alert < 0 {
		t.Fatalf("no alert line on the terminal: %q", s)
	}
	conceal := strings.LastIndex(s[:alert], "\x1b[8m")
	if conceal >= 0 && !strings.Contains(s[conceal:alert], "\x1b[0m") && !strings.Contains(s[conceal:alert], "\x1b[m") {
		t.Errorf("cordon's alert line is written in the concealed state the workload left: %q", s)
	}
}
