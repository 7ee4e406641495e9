package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestKernelInterfacesNotWritable: the sandbox, even started by root, is not host
// root: the machine-wide sysctls (core_pattern ran a workspace script as host root
// once), sysrq and uevent_helper refuse it — for permission, not by chance.
func TestKernelInterfacesNotWritable(t *testing.T) {
	w := newWorld(t)
	out := w.attack("sysctl")
	assertContains(t, "core_pattern refused", out, "write /proc/sys/kernel/core_pattern denied: open /proc/sys/kernel/core_pattern: ")
	if strings.Contains(out, "core_pattern denied: open /proc/sys/kernel/core_pattern: no such file") {
		t.Errorf("core_pattern must exist (and refuse), not be missing: %s", out)
	}
	r := w.sh("id -u; cat /proc/sys/kernel/core_pattern >/dev/null && echo readable")
	assertContains(t, "sysctls stay readable", r.stdout, "readable")
	if os.Geteuid() == 0 && strings.HasPrefix(r.stdout, "0\n") && os.Getenv("CORDON_BACKEND") == "" {
		t.Errorf("a bwrap sandbox started by root runs as uid 0: %v", r)
	}
}

// TestProcessOneOutOfReach: no command can ptrace process 1, open its descriptors
// (the control socket, a command's cgroup directory), read its memory or environment.
func TestProcessOneOutOfReach(t *testing.T) {
	w := newWorld(t)
	out := w.attack("pid1")
	for _, want := range []string{"ptrace-seize 1 denied", "ptrace-attach 1 denied", "read /proc/1/environ denied", "open /proc/1/mem denied", "pidfd_getfd 1 denied"} {
		assertContains(t, "process 1", out, want)
	}
	if os.Getenv("CORDON_BACKEND") == "" {
		assertContains(t, "process 1's descriptors", out, "list /proc/1/fd denied")
	}
	// The control: a debugger of the command's own children keeps working.
	r := w.cordon("", "run", "--", "./attack", "trace-child")
	assertContains(t, "ptrace of an own child", r.stdout, "traced child: stopped under ptrace")
}

// TestSeccompRefusesWhatAgentsNeverNeed: the second kernel layer, on every backend.
func TestSeccompRefusesWhatAgentsNeverNeed(t *testing.T) {
	w := newWorld(t)
	out := w.attack("seccomp")
	for _, want := range []string{"keyctl denied: operation not permitted", "bpf denied: operation not permitted",
		"unshare-user denied: operation not permitted", "perf_event_open denied: operation not permitted",
		"userfaultfd denied: operation not permitted", "io_uring_setup denied: operation not permitted",
		"clone3-newuser denied", "socket-vsock denied: operation not permitted",
		"mount denied: operation not permitted"} {
		assertContains(t, "seccomp", out, want)
	}
	r := w.sh("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
	assertContains(t, "filter mode", r.stdout, "Seccomp:\t2")
}

// TestNoCgroupReachable: no cgroup file is writable from inside, so no command can
// kill a host cgroup or move itself out of its own.
func TestNoCgroupReachable(t *testing.T) {
	w := newWorld(t)
	out := w.attack("cgroup")
	assertContains(t, "walked", out, "cgroup done")
}

// TestStdioIsNotAHostFile: a command's standard descriptors are pipes (or /dev/null),
// never the file cordon's own output goes to, and it inherits nothing else.
func TestStdioIsNotAHostFile(t *testing.T) {
	w := newWorld(t)
	w.attacker()
	in := filepath.Join(t.TempDir(), "stdin.txt")
	mustWrite(t, in, "host file\n")
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "./attack", "stdio")
	cmd.Dir, cmd.Env, cmd.Stdin = w.ws, w.env, f
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "stdin.txt") {
		t.Errorf("the host file cordon's stdin is reached the sandbox: %s", out)
	}
	assertContains(t, "stdin", string(out), "fd0 pipe:")
	// A shell opens nothing of its own: its descriptors are what it was given. No
	// pipeline: the shell's own ends of a pipe would show while ls reads the directory.
	r := w.sh("ls /proc/$$/fd")
	if strings.Join(strings.Fields(r.stdout), " ") != "0 1 2" {
		t.Errorf("the command inherited descriptors beyond stdio: %v", r)
	}
}

// TestSessionProcessOneCannotBeTakenOver: in a session, a command that signals, ptraces
// or reaches for process 1's descriptors changes nothing: the next exec runs and its
// result is its own.
func TestSessionProcessOneCannotBeTakenOver(t *testing.T) {
	w := newWorld(t)
	w.attacker()
	id := w.startSession()
	r := w.cordon("", "exec", id, "--", "./attack", "signals")
	assertContains(t, "process 1 ignores signals", r.stdout, "pid1 alive")
	r = w.cordon("", "exec", id, "--", "./attack", "pid1")
	if r.code != 0 {
		t.Fatalf("attack pid1: %v", r)
	}
	assertRefused(t, "pid1", r.stdout)
	r = w.cordon("", "exec", id, "--", "sh", "-c", "echo REAL; exit 3")
	if r.code != 3 || r.stdout != "REAL\n" {
		t.Fatalf("the exec after the attacks was not the real one: %v", r)
	}
	if s := w.cordon("", "session", "stop", id); s.code != 0 {
		t.Fatalf("stop: %v", s)
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Fatalf("verify: %v", v)
	}
}

// TestNoSetIDFilesPlanted: a file the sandbox writes is its owner's on the host (with
// bwrap started by root, host root's, through the idmapped workspace), so a
// set-user-ID or set-group-ID bit on it would be a setuid program planted for the
// host to run. The filter refuses the bit on every call that sets a mode.
func TestNoSetIDFilesPlanted(t *testing.T) {
	w := newWorld(t)
	r := w.sh("cp /bin/sh ./suid; chmod 4755 ./suid; echo chmod=$?; chmod g+s ./suid; echo chmodg=$?; mkdir -m 2775 d; echo mkdir=$?; chmod 755 ./suid; echo plain=$?")
	for _, want := range []string{"chmod=1", "chmodg=1", "mkdir=1", "plain=0"} {
		assertContains(t, "set-id bits refused", r.stdout, want)
	}
	fi, err := os.Stat(filepath.Join(w.ws, "suid"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("the sandbox planted a set-id file on the host: %v", fi.Mode())
	}
}

// TestHostWatchCannotBeHeld: on the container backends process 1 learns that cordon
// died when the host's end of the status FIFO closes; a command holding a read end of
// its own would keep the container running for ever after a kill -9. No command can
// open the files protocol's entries.
func TestHostWatchCannotBeHeld(t *testing.T) {
	w := newWorld(t)
	r := w.sh("for f in status env spec.json; do (exec 5</run/cordon/$f) 2>/dev/null && echo held $f || echo refused $f; done; ls /run/cordon >/dev/null && echo listed")
	for _, f := range []string{"status", "env", "spec.json"} {
		assertContains(t, "files protocol", r.stdout, "refused "+f)
	}
	assertContains(t, "/run/cordon stays listable", r.stdout, "listed")
}

// TestContractNotWritable: the sandbox can neither rewrite nor create the contract a
// later run reads (the workspace's cordon.yaml, the -c file inside the workspace):
// one command would otherwise widen every run after it.
func TestContractNotWritable(t *testing.T) {
	w := newWorld(t)
	// No cordon.yaml yet: the built-in default contract, and none may be created.
	r := w.sh("echo 'version: 1' > cordon.yaml 2>&1; echo create=$?")
	if !strings.Contains(r.stdout, "create=") || strings.Contains(r.stdout, "create=0") {
		t.Fatalf("cordon.yaml could be created: %v", r)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "cordon.yaml")); err == nil {
		if data, _ := os.ReadFile(filepath.Join(w.ws, "cordon.yaml")); len(data) > 0 {
			t.Fatalf("the sandbox wrote a contract: %q", data)
		}
	}
	w.contract("version: 1\n")
	r = w.sh("echo 'filesystem: {readable: [\"/\"]}' >> cordon.yaml 2>&1; echo append=$?; mv cordon.yaml x.yaml 2>&1; echo mv=$?")
	if strings.Contains(r.stdout, "append=0") || strings.Contains(r.stdout, "mv=0") || !strings.Contains(r.stdout, "mv=") {
		t.Fatalf("cordon.yaml could be changed or moved: %v", r)
	}
	ci := filepath.Join(w.ws, "ci", "contract.yaml")
	mustWrite(t, ci, "version: 1\nworkspace: ..\n")
	r = w.cordon("", "run", "-c", ci, "--", "sh", "-c", "echo x >> ci/contract.yaml; echo ci=$?")
	if !strings.Contains(r.stdout, "ci=") || strings.Contains(r.stdout, "ci=0") {
		t.Fatalf("the -c file in the workspace could be written: %v", r)
	}
	if data, _ := os.ReadFile(filepath.Join(w.ws, "cordon.yaml")); string(data) != "version: 1\n" {
		t.Fatalf("the contract changed: %q", data)
	}
}

// TestDenialsHoldAgainstRenames: a denied path's directories are mount points, so
// renaming one fails and the secret stays masked in this run and the next.
func TestDenialsHoldAgainstRenames(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "secrets", "key.pem"), "TOPSECRET\n")
	mustWrite(t, filepath.Join(w.ws, ".github", "workflows", "ci.yml"), "on: push\n")
	w.contract("version: 1\nfilesystem:\n  deny_read: [secrets/key.pem]\n  deny_write: [.git, .github/workflows]\n")
	r := w.sh("mv secrets s2 2>&1; echo mv=$?; mv .github x 2>&1; echo mvgh=$?; mkdir -p .github/workflows; echo evil > .github/workflows/evil.yml; echo wf=$?")
	for _, bad := range []string{"mv=0", "mvgh=0", "wf=0"} {
		if strings.Contains(r.stdout, bad) {
			t.Fatalf("a denial moved or was bypassed (%s): %v", bad, r)
		}
	}
	r = w.sh("cat secrets/key.pem s2/key.pem 2>&1")
	if strings.Contains(r.stdout, "TOPSECRET") {
		t.Fatalf("the secret was read: %v", r)
	}
	if _, err := os.Stat(filepath.Join(w.ws, ".github", "workflows", "evil.yml")); err == nil {
		t.Fatal("a workflow was planted")
	}
}

// TestDenialThroughALinkRefused: a denied path reached through a symbolic link in the
// workspace (a .git link to a repository elsewhere) could be replaced by the sandbox
// with its own (a config whose fsmonitor host git runs): cordon refuses the run.
func TestDenialThroughALinkRefused(t *testing.T) {
	w := newWorld(t)
	repo := filepath.Join(t.TempDir(), "repo")
	mustMkdir(t, filepath.Join(repo, ".git"))
	if err := os.Symlink(filepath.Join(repo, ".git"), filepath.Join(w.ws, ".git")); err != nil {
		t.Fatal(err)
	}
	r := w.sh("rm .git; mkdir .git; echo pwned > .git/config")
	if r.code != 125 || !strings.Contains(r.stderr, "symbolic link") {
		t.Fatalf("want 125 naming the link, got %v", r)
	}
	if fi, err := os.Lstat(filepath.Join(w.ws, ".git")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the .git link was replaced: %v %v", fi, err)
	}
}

// TestCheckJudgesTheRunPlan: check, explain and run compile one plan with the same
// inputs, so a contract run refuses (it grants the audit root, a protected path) is
// one check rejects, for the same reason.
func TestCheckJudgesTheRunPlan(t *testing.T) {
	w := newWorld(t)
	audit := filepath.Join(w.home, "audit")
	mustMkdir(t, audit)
	w.env = append(w.env, "CORDON_AUDIT_DIR="+audit)
	w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", " + strconv.Quote(audit) + "]\n")
	c := w.cordon("", "check")
	r := w.cordon("", "run", "--", "true")
	e := w.cordon("", "explain")
	if c.code != 1 || r.code != 125 || e.code == 0 {
		t.Fatalf("check %d, run %d, explain %d; want 1, 125, refused:\ncheck: %v\nrun: %v", c.code, r.code, e.code, c, r)
	}
	if !strings.Contains(c.stdout, audit) || !strings.Contains(r.stderr, audit) {
		t.Fatalf("check and run must name the same reason:\ncheck: %v\nrun: %v", c, r)
	}
}

// TestHostExecutedFilesProtected: what tools on the host run later (direnv's .envrc,
// editor tasks, agent hooks, MCP servers) cannot be planted or changed by default; a
// widen entry with a why releases one.
func TestHostExecutedFilesProtected(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, ".envrc"), "export A=1\n")
	r := w.sh("for f in .envrc .mcp.json .vscode/tasks.json .claude/settings.json .idea/workspace.xml .gitmodules; do " +
		"mkdir -p $(dirname $f) 2>/dev/null; echo evil >> $f 2>/dev/null && echo planted $f; done; echo done")
	assertContains(t, "ran", r.stdout, "done")
	if strings.Contains(r.stdout, "planted") {
		t.Fatalf("a host-executed file was planted: %v", r)
	}
	if data, _ := os.ReadFile(filepath.Join(w.ws, ".envrc")); string(data) != "export A=1\n" {
		t.Fatalf(".envrc changed: %q", data)
	}
	for _, f := range []string{".mcp.json", ".vscode", ".claude", ".gitmodules"} {
		if _, err := os.Lstat(filepath.Join(w.ws, f)); err == nil {
			t.Errorf("%s was left in the workspace", f)
		}
	}
	mustMkdir(t, filepath.Join(w.ws, ".vscode"))
	w.contract("version: 1\nfilesystem:\n  widen:\n    - {path: .vscode, access: write, why: the agent edits launch configs}\n")
	r = w.sh("echo '{}' > .vscode/launch.json && echo wrote")
	assertContains(t, "widened", r.stdout, "wrote")
	e := w.cordon("", "explain")
	assertContains(t, "explain lists the protection", e.stdout, ".envrc")
}

// TestContractPlaceholderIsNoContract: while a session keeps a missing cordon.yaml
// from being created (an empty placeholder on the host), another run in the same
// workspace still sees no contract, not an empty one.
func TestContractPlaceholderIsNoContract(t *testing.T) {
	w := newWorld(t)
	w.startSession()
	if r := w.cordon("", "run", "--", "true"); r.code != 0 {
		t.Fatalf("a run beside a session: %v", r)
	}
	if c := w.cordon("", "check"); c.code != 0 || !strings.Contains(c.stdout, "built-in default contract: valid") {
		t.Fatalf("check beside a session: %v", c)
	}
}

// TestSessionLogHasNoGaps: a change no command's diff holds — a background process
// of an earlier exec writing between two execs — is still in the log, as an fs.diff
// marked between commands.
func TestSessionLogHasNoGaps(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "(sleep 0.3; echo sneaky > auth.py) >/dev/null 2>&1 &"); r.code != 0 {
		t.Fatal(r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(w.ws, "auth.py")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Fatal(r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
	found := false
	for _, ev := range sessionEvents(t, w, id) {
		if string(ev.Type) == "fs.diff" && strings.Contains(string(ev.Body), `"between_commands":true`) && strings.Contains(string(ev.Body), "auth.py") {
			found = true
		}
	}
	if !found {
		t.Fatal("the change made between commands is not in the log")
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Fatalf("verify: %v", v)
	}
	show := w.cordon("", "audit", "show", id)
	if show.code != 0 || !strings.Contains(show.stdout, "auth.py") || !strings.Contains(show.stdout, "between commands") {
		t.Fatalf("audit show must show the change between commands: %v", show)
	}
}

// TestNestedRepositoryQuarantined: a nested .git a command creates (its config's
// core.fsmonitor would run on the host's next git status there) shows in the diff and
// is renamed out of git's sight when the command ends; one that was there before stays.
func TestNestedRepositoryQuarantined(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "vendor", "dep", ".git", "HEAD"), "ref: refs/heads/main\n")
	// Prepared elsewhere and moved into place whole, so that it is complete whether it is
	// disarmed the moment it appears (as root) or when the command ends.
	r := w.sh("mkdir -p prep docs && printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > prep/config && echo ref > prep/HEAD && mv prep docs/.git")
	if r.code != 0 {
		t.Fatal(r)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "docs", ".git")); err == nil {
		t.Fatal("the nested repository is still there")
	}
	if _, err := os.Stat(filepath.Join(w.ws, "docs", ".git.cordon-quarantine", "config")); err != nil {
		t.Fatalf("the quarantined repository is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "vendor", "dep", ".git", "HEAD")); err != nil {
		t.Fatalf("a repository that was there before was touched: %v", err)
	}
	assertContains(t, "cordon says so", r.stderr, "renamed docs/.git to docs/.git.cordon-quarantine")
	show := w.cordon("", "audit", "show", "--diff", "last")
	assertContains(t, "the diff shows it", show.stdout, "docs/.git")
	// A bare repository anywhere (HEAD, objects/, refs/, config) is one git obeys when
	// run inside it: its HEAD is renamed, so git no longer sees a repository there.
	r = w.sh("mkdir -p site/objects site/refs && printf 'ref: refs/heads/main\\n' > site/HEAD && printf '[core]\\n\\tpager = touch /tmp/pwned\\n' > site/config")
	assertContains(t, "cordon says so", r.stderr, "renamed site/HEAD to site/HEAD.cordon-quarantine")
	if _, err := os.Stat(filepath.Join(w.ws, "site", "HEAD")); err == nil {
		t.Fatal("the bare repository is still one")
	}
	if out, err := exec.Command("git", "-C", filepath.Join(w.ws, "site"), "rev-parse", "--git-dir").CombinedOutput(); err == nil && strings.TrimSpace(string(out)) == "." {
		t.Fatalf("git still takes site for a repository: %s", out)
	}
	// Moved into place whole, prepared elsewhere: the same.
	r = w.sh("mkdir -p prep/g/objects prep/g/refs && echo 'ref: refs/heads/main' > prep/g/HEAD && mv prep/g lib.git && mkdir lib && mv lib.git lib/.git")
	assertContains(t, "cordon says so", r.stderr, "renamed lib/.git to lib/.git.cordon-quarantine")
}

// TestNewRepositoryDisarmedAtOnce: as root, cordon watches the workspace's file system
// and disarms a git repository the moment it is made, not when the command ends: a git
// the host runs there meanwhile (an editor polling) never sees it.
func TestNewRepositoryDisarmedAtOnce(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	r := w.sh("mkdir -p prep/objects prep/refs && echo 'ref: refs/heads/main' > prep/HEAD && " +
		"printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > prep/config && mkdir docs && mv prep docs/.git; " +
		"i=0; while [ -e docs/.git ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done; " +
		"[ -e docs/.git ] && echo still-there; ls -a docs; " +
		"mkdir -p p2/objects p2/refs && echo 'ref: refs/heads/main' > p2/HEAD && mv p2 site; " +
		"mkdir -p c/objects c/refs && exec 3>c/HEAD && printf 'ref: refs/heads/main\\n' >&3 && " +
		"i=0; while [ -e c/HEAD ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done; [ -e c/HEAD ] && echo open-still-there; exec 3>&-; " +
		"i=0; while [ -e site/HEAD ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done; [ -e site/HEAD ] && echo bare-still-there; echo done")
	assertContains(t, "ran", r.stdout, "done")
	if strings.Contains(r.stdout, "still-there") {
		t.Fatalf("a new repository lived on while its command ran: %v", r)
	}
	assertContains(t, "the command saw it quarantined", r.stdout, ".git.cordon-quarantine")
	show := w.cordon("", "audit", "show", "--diff", "last")
	for _, q := range []string{"docs/.git", "site/HEAD"} {
		assertContains(t, "the log lists what was quarantined", show.stdout, q)
	}
}
