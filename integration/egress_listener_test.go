package integration

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestEgressListenerHandedOver: on every backend, in a one-command run and in a
// session, the sandbox's proxy clients reach the egress proxy on 127.0.0.1:3128 in the
// sandbox's own network namespace (the listener process 1 made and handed over), with
// no unix socket of the proxy's inside; on a kept-alive connection each plain-HTTP
// request is still checked on its own.
func TestEgressListenerHandedOver(t *testing.T) {
	t.Run("bwrap", testEgressListenerHandedOver)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testEgressListenerHandedOver(t) })
}

func testEgressListenerHandedOver(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	hello := "http://127.0.0.2:" + up.port + "/hello"
	// 0100007F:0C38 ... 0A: a socket listening on 127.0.0.1:3128 in this namespace.
	script := `test -e /run/cordon/egress.sock && echo egress.sock is there
grep -q ' 0100007F:0C38 00000000:0000 0A ' /proc/net/tcp && echo listening inside
curl -sS --max-time 10 -w ' connects=%{num_connects}\n' ` + hello + ` http://denied.example:` + up.port + `/x`
	check := func(what string, r result) {
		t.Helper()
		if r.code != 0 || strings.Contains(r.stdout, "egress.sock") || !strings.Contains(r.stdout, "listening inside") {
			t.Errorf("%s: want the proxy's listener inside and no egress.sock: %v", what, r)
		}
		// The second request reuses the proxy connection (0 new connects) and is
		// refused by itself.
		if !strings.Contains(r.stdout, "hello from upstream\n connects=1") || !strings.Contains(r.stdout, " connects=0") ||
			!strings.Contains(r.stderr, "denied.example") {
			t.Errorf("%s: want the allowed request served and the denied one refused on the same connection: %v", what, r)
		}
	}
	check("run", w.sh(script))
	id := w.startSession()
	for i := range 2 {
		check("session exec "+string(rune('1'+i)), w.cordon("", "exec", id, "--", "sh", "-c", script))
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Errorf("session stop: %v", r)
	}
	if got := up.hits.Load(); got != 3 {
		t.Errorf("upstream saw %d requests; want 3 (the denied ones never reach it)", got)
	}
}

// Red team of the handed-over egress listener (branch redegress): process 1 makes the
// proxy's listening socket on 127.0.0.1:3128 in the sandbox's network namespace and
// hands it to cordon, which accepts on it directly. These tests attack it from inside
// the sandbox and look for it from the host.

// redBind tries to bind (and listen on) a TCP socket on ARGV[0]:3128, with
// SO_REUSEADDR, and SO_REUSEPORT when ARGV[1] is set; it prints what happened.
const redBind = `use Socket;
my ($addr, $reuseport) = @ARGV;
socket(my $s, PF_INET, SOCK_STREAM, IPPROTO_TCP) or die "socket: $!";
setsockopt($s, SOL_SOCKET, SO_REUSEADDR, 1) or die "SO_REUSEADDR: $!";
if ($reuseport) { setsockopt($s, SOL_SOCKET, 15, 1) or die "SO_REUSEPORT: $!"; }
if (!bind($s, pack_sockaddr_in(3128, inet_aton($addr)))) { print "bind $addr reuseport=$reuseport: $!\n"; exit 0; }
if (!listen($s, 5)) { print "listen $addr reuseport=$reuseport: $!\n"; exit 0; }
print "STOLEN $addr reuseport=$reuseport\n";
`

// redGetfd tries pidfd_getfd(2) on each of process 1's first 64 descriptors (the
// listener was among them until the hand-over), then ptrace(PTRACE_ATTACH) of process
// 1, and prints what it got.
const redGetfd = `my $pidfd = syscall(434, 1, 0); # pidfd_open(1, 0)
if ($pidfd < 0) { print "pidfd_open: $!\n"; exit 0; }
for my $fd (0..63) { my $got = syscall(438, $pidfd, $fd, 0); print "READ pidfd_getfd $fd\n" if $got >= 0; }
print "pidfd_getfd: done\n";
my $ptrace = (` + "`uname -m`" + ` =~ /aarch64/) ? 117 : 101;
print "READ ptrace attached\n" if syscall($ptrace, 16, 1, 0, 0) == 0; # PTRACE_ATTACH
print "ptrace: $!\n";
`

// redRaw sends stdin (\n made \r\n) as is to the proxy on one connection, half-closes,
// and prints each status line and X-Cordon-Denied header it gets back.
const redRaw = `use IO::Socket::INET;
my $req = join("", <STDIN>);
$req =~ s/\n/\r\n/g;
my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => 3128, Proto => "tcp") or die "connect: $!";
print $s $req;
shutdown($s, 1);
alarm 60;
while (<$s>) { print "< $_" if /^HTTP\// || /^X-Cordon-Denied/i; }
print "< closed\n";
`

// TestRedEgressInsideCannotTakeTheListener: a workload cannot steal or shadow the
// proxy's port (the same address with SO_REUSEADDR and SO_REUSEPORT, or the wildcard),
// cannot make a network namespace of its own to get around it, cannot reach process 1's
// descriptors, and the proxy still serves afterwards.
func TestRedEgressInsideCannotTakeTheListener(t *testing.T) {
	t.Run("bwrap", testRedEgressInside)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedEgressInside(t) })
}

func testRedEgressInside(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	mustWrite(t, filepath.Join(w.ws, "bind.pl"), redBind)
	mustWrite(t, filepath.Join(w.ws, "getfd.pl"), redGetfd)
	script := `perl bind.pl 127.0.0.1 ""; perl bind.pl 127.0.0.1 1; perl bind.pl 0.0.0.0 ""; perl bind.pl 0.0.0.0 1
unshare -n true 2>/dev/null && echo UNSHARED
unshare -Urn true 2>/dev/null && echo UNSHARED user
for f in /proc/1/fd/*; do readlink "$f" >/dev/null 2>&1 && echo READ "$f"; (exec 9<"$f") 2>/dev/null && echo READ open "$f"; done
perl getfd.pl
curl -sS --max-time 10 http://127.0.0.2:` + up.port + `/hello`
	r := w.sh(script)
	if r.code != 0 || strings.Contains(r.stdout, "STOLEN") || strings.Contains(r.stdout, "UNSHARED") || strings.Contains(r.stdout, "READ") {
		t.Fatalf("the workload got at the proxy's port, a namespace of its own or process 1's descriptors: %v", r)
	}
	if got := strings.Count(r.stdout, "Address already in use"); got != 4 {
		t.Errorf("want each of the 4 binds refused with EADDRINUSE: %v", r)
	}
	if !strings.Contains(r.stdout, "pidfd_getfd: done") || !strings.Contains(r.stdout, "ptrace: Operation not permitted") {
		t.Errorf("want pidfd_getfd and ptrace of process 1 tried and refused: %v", r)
	}
	if !strings.Contains(r.stdout, "hello from upstream") {
		t.Errorf("the proxy stopped serving after the attempts: %v", r)
	}
}

// TestRedEgressNothingListensOnTheHost: while a run's command is running, no process
// of cordon's in the host's network namespace holds a socket listening there (TCP or
// unix), and the run root holds no socket file: a host process, of any uid, has nothing
// to connect to for the run's allowlist or credentials.
func TestRedEgressNothingListensOnTheHost(t *testing.T) {
	t.Run("bwrap", testRedEgressNothingOnHost)
	forEachContainerBackend(t, func(t *testing.T, _ string) { testRedEgressNothingOnHost(t) })
}

func testRedEgressNothingOnHost(t *testing.T) {
	w := newWorld(t)
	up := newUpstream(t, false, "127.0.0.2:0")
	w.egressContract(up.port)
	cmd, stdin, stdout := w.startCordon("run", "--", "sh", "-c", "curl -sS --max-time 10 http://127.0.0.2:"+up.port+"/hello; echo ready; read x; echo done")
	if !waitLine(stdout, "ready") {
		t.Fatal("the command never got ready")
	}
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	listening := hostListeners(t)
	for _, pid := range append([]int{cmd.Process.Pid}, descendants(cmd.Process.Pid)...) {
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); ns != hostNet {
			continue // the sandbox's own
		}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			l, _ := os.Readlink(fd)
			if what, ok := listening[l]; ok {
				t.Errorf("process %d (%s) listens in the host's namespace: %s %s", pid, cmdline(pid), fd, what)
			}
		}
	}
	_ = filepath.Walk(w.runRoot, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeSocket != 0 {
			t.Errorf("a socket in the run root while the command runs: %s", p)
		}
		return nil
	})
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if !waitLine(stdout, "done") {
		t.Error("the command did not finish")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("cordon run: %v", err)
	}
}

// startCordon starts cordon with args in the workspace, with pipes to its stdin and
// from its stdout (stderr goes to the test's log at the end).
func (w *world) startCordon(args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	w.t.Helper()
	cmd := exec.Command(testutil.Cordon(w.t), args...)
	cmd.Dir, cmd.Env = w.ws, w.env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if errb.Len() > 0 {
			w.t.Logf("cordon %v stderr: %s", args, errb.String())
		}
	})
	return cmd, stdin, bufio.NewReader(out)
}

// waitLine reads r until a line that is want, or its end (false).
func waitLine(r *bufio.Reader, want string) bool {
	for {
		l, err := r.ReadString('\n')
		if strings.TrimSpace(l) == want {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// hostListeners maps "socket:[inode]" to a description for every socket listening in
// this process's network namespace: TCP (state 0A) and unix (__SO_ACCEPTCON).
func hostListeners(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) > 9 && fs[3] == "0A" {
				out["socket:["+fs[9]+"]"] = f + " " + fs[1]
			}
		}
	}
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n")[1:] {
		fs := strings.Fields(l)
		if len(fs) > 6 && fs[3] == "00010000" {
			out["socket:["+fs[6]+"]"] = "unix " + strings.Join(fs[7:], " ")
		}
	}
	return out
}

// descendants are pid's descendants, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		var me, parent int
		var state string
		fmt.Sscanf(s[:strings.IndexByte(s, ' ')], "%d", &me)
		fmt.Sscanf(s[i+2:], "%s %d", &state, &parent)
		children[parent] = append(children[parent], me)
	}
	var out []int
	next := []int{pid}
	for len(next) > 0 {
		p := next[0]
		next = next[1:]
		out = append(out, children[p]...)
		next = append(next, children[p]...)
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}
