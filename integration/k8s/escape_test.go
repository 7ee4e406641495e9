//go:build k8s

package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// podAttacks are attacks a session's command makes from inside its Pod, each a shell
// script printing one line per attempt; held lists the lines that say it was held.
// They are the local backends' escape tests (file system, process 1, kernel
// interfaces, the control channel) as one command each, since a Pod is reached through
// the placement's channel rather than `cordon run`. Egress and other Pods are
// TestPodNetwork's and TestPodEgress's.
var podAttacks = []struct {
	name, script string
	held         []string
}{
	{"WriteOutsideWorkspace", `for p in / /etc /usr /bin /run/cordon /var; do
  touch "$p/cordon-escape" 2>/dev/null && echo "$p=written" || echo "$p=refused"
done`, []string{"/=refused", "/etc=refused", "/usr=refused", "/bin=refused", "/run/cordon=refused", "/var=refused"}},
	{"WriteIntoGit", `touch "$WS/.git/hooks-escape" 2>/dev/null && echo touch=written || echo touch=refused
mv "$WS/.git" "$WS/moved" 2>/dev/null && echo rename=done || echo rename=refused
rm -rf "$WS/.git" 2>/dev/null; [ -d "$WS/.git" ] && echo remove=refused || echo remove=done
ln -s /tmp "$WS/.git/link" 2>/dev/null && echo link=made || echo link=refused`,
		[]string{"touch=refused", "rename=refused", "remove=refused", "link=refused"}},
	{"DenyReadHolds", `ls -A "$WS/.env" | wc -l | sed 's/^ */entries=/'
cat "$WS/.env/"* 2>/dev/null | wc -c | sed 's/^ */bytes=/'`, []string{"entries=0", "bytes=0"}},
	// The control socket's directory may be listed (Landlock's read_dir on /run reaches
	// below it) but is empty once cordon has attached, and nothing can be made there.
	{"SymlinkCannotWidenAccess", `ln -s /run/cordon-control "$WS/ctl" && touch "$WS/ctl/x" 2>/dev/null && echo control=written || echo control=refused
ln -s /proc/1/root "$WS/root1" && ls "$WS/root1/" >/dev/null 2>&1 && echo root1=listed || echo root1=refused
ln -s / "$WS/slash" && touch "$WS/slash/etc/escape" 2>/dev/null && echo etc=written || echo etc=refused`,
		[]string{"control=refused", "root1=refused", "etc=refused"}},
	// The command's parent is the Pod's inner init, which is not the Pod's process 1.
	// Process 1 of the Pod's pid namespace takes no SIGKILL or SIGSTOP from inside it;
	// the inner init, its child, does (same uid): a command can end or stall its own
	// session, no other (docs/kubernetes.md).
	{"ProcessOneOutOfReach", `kill -KILL 1 2>/dev/null; kill -STOP 1 2>/dev/null
st=$(grep '^State:' /proc/1/status)
case "$st" in *stopped*|*zombie*|*dead*|"") echo "pid 1=$st" ;; *) echo "pid 1=running" ;; esac
for p in 1 $PPID; do
  n=1; [ "$p" = 1 ] || n=parent
  cat /proc/$p/environ >/dev/null 2>&1 && echo "environ $n=read" || echo "environ $n=refused"
  ls /proc/$p/fd >/dev/null 2>&1 && echo "fd $n=listed" || echo "fd $n=refused"
  ls /proc/$p/root/ >/dev/null 2>&1 && echo "root $n=listed" || echo "root $n=refused"
done`, []string{"pid 1=running", "environ 1=refused", "fd 1=refused", "root 1=refused",
		"environ parent=refused", "fd parent=refused", "root parent=refused"}},
	{"KernelInterfacesNotWritable", `echo 1 2>/dev/null >/proc/sys/kernel/printk && echo printk=written || echo printk=refused
echo c 2>/dev/null >/proc/sysrq-trigger && echo sysrq=written || echo sysrq=refused
echo $$ 2>/dev/null >/sys/fs/cgroup/cgroup.procs && echo cgroup=written || echo cgroup=refused
mkdir -p /tmp/m && mount -t tmpfs none /tmp/m 2>/dev/null && echo mount=done || echo mount=refused
unshare -U true 2>/dev/null && echo userns=made || echo userns=refused
unshare -n true 2>/dev/null && echo netns=made || echo netns=refused`,
		[]string{"printk=refused", "sysrq=refused", "cgroup=refused", "mount=refused", "userns=refused", "netns=refused"}},
	{"ControlChannelOutOfReach", `echo "dir=$(ls -A /run/cordon-control 2>/dev/null | wc -l) entries"
touch /run/cordon-control/x 2>/dev/null && echo create=done || echo create=refused
nc -U /run/cordon-control/init.sock </dev/null >/dev/null 2>&1 && echo socket=connected || echo socket=refused
[ -e /var/run/secrets/kubernetes.io/serviceaccount/token ] && echo token=present || echo token=absent`,
		[]string{"dir=0 entries", "create=refused", "socket=refused", "token=absent"}},
	// The whole workspace volume is mounted only in the workspace sidecar, which
	// shares no mount or pid namespace with the commands: nothing of it is in reach.
	{"WorkspaceSidecarOutOfReach", `[ -e /run/cordon-workspace ] && echo mount=present || echo mount=absent
grep -c ' /run/cordon-workspace ' /proc/self/mountinfo | sed 's/^/mounts=/'
w=pod; w="${w}ws wait" # not spelled out: this script's own command line holds it
n=0; for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null | grep -q "$w" && n=$((n+1)); done; echo "sidecar processes=$n"`,
		[]string{"mount=absent", "mounts=0", "sidecar processes=0"}},
}

// Every attack of podAttacks is held in a session's Pod, and the session still serves
// commands afterwards: process 1 and the channel outlived them all.
func TestPodEscapes(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	p, s := startPlaced(ctx, t, cs, plan, cfg)
	ch, err := p.Attach(ctx, rc, s, podspec.InitSpec(plan, cfg, append([]string{"WS=" + plan.Workspace}, podEnv...)))
	if err != nil {
		t.Fatalf("attaching: %v%s", err, describe(ctx, cs, ns, podspec.Name(s.ID)))
	}
	defer ch.Close()
	r := &runner{t: t, ch: ch, dir: plan.Workspace}
	for _, a := range podAttacks {
		t.Run(a.name, func(t *testing.T) {
			r.t = t
			_, stdout, stderr := r.run("", "/bin/sh", "-c", a.script)
			got := map[string]bool{}
			for _, l := range strings.Split(stdout, "\n") {
				got[l] = true
			}
			for _, want := range a.held {
				if !got[want] {
					t.Errorf("want %q; the attack printed:\n%s%s", want, stdout, stderr)
				}
			}
		})
	}
	r.t = t
	if code, out, _ := r.run("", "/bin/echo", "still serving"); code != 0 || out != "still serving\n" {
		t.Errorf("after the attacks: status %d, output %q; want the session still serving", code, out)
	}
}
