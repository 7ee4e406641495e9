package handoff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// The hand-off mounts a tmpfs over Root and the handed-over sources in it: all of that must
// stay in the mount namespace of the thread that starts the sandbox, never the
// host's, and the sandbox must run as the hand-off's uid, seeing its idmapped source as
// its own.
func TestHandoffMountsOnlyInItsOwnNamespace(t *testing.T) {
	testutil.RequireRoot(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile("/proc/self/mountinfo")
	sp := &Spec{UID: 64999, GID: 64999, Sources: []Source{{Path: src, Dir: true, In: -1, Idmap: &Owner{}, Writable: true}}}
	cmd := exec.Command("/bin/sh", "-c", "id -u; cat "+Root+"/0/f; grep -c ' "+Root+"' /proc/self/mountinfo")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	release, err := Start(sp, cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "64999\nx") {
		t.Errorf("want uid 64999 reading its idmapped source, got %q", got)
	}
	// Other tests (container engines) mount and unmount on the host meanwhile: what
	// counts is that nothing appeared at or below Root.
	after, _ := os.ReadFile("/proc/self/mountinfo")
	if b, a := rootMounts(string(before)), rootMounts(string(after)); a != b {
		t.Fatalf("the hand-off mounted at %s in the host's mount namespace:\nbefore:\n%s\nafter:\n%s", Root, b, a)
	}
}

// rootMounts are the lines of a mountinfo whose mount point is Root or below it.
func rootMounts(mountinfo string) string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == Root || strings.HasPrefix(f[4], Root+"/")) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func TestHandoffRefusesRootAsTheSandboxUID(t *testing.T) {
	testutil.RequireRoot(t)
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if _, err := Start(&Spec{UID: 0}, cmd); err == nil {
		t.Fatal("the hand-off accepted uid 0")
	}
}

// A source path that meets a symbolic link was swapped since the Plan resolved it:
// handing it over would mount whatever the link points to.
func TestCloneRefusesLinks(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if f, err := linux.CloneTree(nil, filepath.Join(dir, "sub", "ssl"), nil); err == nil {
		f.Close()
		t.Fatal("a path through a symbolic link was cloned")
	}
	if f, err := linux.CloneTree(nil, dir, nil); err != nil {
		t.Fatalf("a plain directory: %v", err)
	} else {
		f.Close()
	}
}

// A namespace made beforehand (Prepare) idmaps the sources of its owner as the one
// the hand-off would have made, is left open by it (it is the caller's), and one for
// other ids is not used.
func TestHandoffPrepared(t *testing.T) {
	testutil.RequireRoot(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := Prepare(Owner{}, 64999, 64999)
	defer u.Close()
	other := Prepare(Owner{}, 64998, 64998)
	defer other.Close()
	sp := &Spec{UID: 64999, GID: 64999, Sources: []Source{{Path: src, Dir: true, In: -1, Idmap: &Owner{}, Writable: true}}, Prepared: []*Userns{other, u}}
	if got := sp.prepared(Owner{}); got != u {
		t.Fatalf("prepared = %p; want the namespace for 64999 (%p)", got, u)
	}
	for i := 0; i < 2; i++ { // twice: the first start leaves it usable
		cmd := exec.Command("/bin/sh", "-c", "id -u; stat -c %u "+Root+"/0/f; cat "+Root+"/0/f")
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		release, err := Start(sp, cmd)
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		release()
		if err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if got := out.String(); got != "64999\n64999\nx" {
			t.Errorf("start %d: want uid 64999 reading its idmapped source as its own, got %q", i, got)
		}
	}
	if f, err := u.file(); err != nil || f == nil {
		t.Fatalf("the prepared namespace was not left open: %v", err)
	}
	u.Close()
	u.Close() // idempotent
}

// A source placed inside an earlier one's tree (Source.Inside) is mounted there,
// read-only, and not at Root/<index>; a place that is a link refuses the start.
func TestHandoffPlacesInside(t *testing.T) {
	testutil.RequireRoot(t)
	src, other := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(src, "p"), filepath.Join(src, "w")} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "mask"), []byte("masked"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(src, "l")); err != nil {
		t.Fatal(err)
	}
	sources := func(placeholderAt string) []Source {
		return []Source{
			{Path: src, Dir: true, In: -1, Idmap: &Owner{}, Writable: true},
			{Path: filepath.Join(src, "p"), Dir: true, In: 0, Inside: &Place{Source: 0, Rel: placeholderAt}},
			{Path: filepath.Join(other, "mask"), In: -1, Inside: &Place{Source: 0, Rel: "f"}},
		}
	}
	r := Root + "/0"
	cmd := exec.Command("/bin/sh", "-c", "cat "+r+"/f; echo; touch "+r+"/p/x 2>/dev/null && echo wrote-p; touch "+r+"/w/x && echo wrote-w; ls "+Root)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	release, err := Start(&Spec{UID: 64999, GID: 64999, Sources: sources("p")}, cmd)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	release()
	if err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got, want := out.String(), "masked\nwrote-w\n0\n"; got != want {
		t.Errorf("got %q; want %q (the mask over f, p read-only, w writable, only source 0 at Root)", got, want)
	}
	cmd = exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if release, err := Start(&Spec{UID: 64999, GID: 64999, Sources: sources("l")}, cmd); err == nil {
		release()
		_ = cmd.Wait()
		t.Fatal("a place that is a symbolic link was mounted over")
	}
}

// A prepared network namespace (Spec.Netns) is where the handed-over command starts:
// loopback only, up, not the host's; the caller's threads stay in the host's, and the
// namespace stays open for the caller until Close.
func TestHandoffNetns(t *testing.T) {
	testutil.RequireRoot(t)
	n := PrepareNetns()
	defer n.Close()
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// Loopback is up when the kernel has given it ::1 (where IPv6 is on).
	cmd := exec.Command("/bin/sh", "-c", "readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "+
		"if [ -e /proc/net/if_inet6 ]; then grep -c ' lo$' /proc/net/if_inet6; else echo 1; fi")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	release, err := Start(&Spec{UID: 64999, GID: 64999, Netns: n}, cmd)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	release()
	if err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 || lines[0] == host || !strings.HasPrefix(lines[0], "net:[") {
		t.Fatalf("the command's network namespace %q; want a new one (the host's is %s)", lines, host)
	}
	if got := strings.Join(lines[1:], " "); got != "lo 1" {
		t.Fatalf("interfaces, then loopback's addresses: %q; want %q (lo alone, up)", got, "lo 1")
	}
	if now, _ := os.Readlink("/proc/self/ns/net"); now != host {
		t.Fatalf("the caller's network namespace is now %s, was %s", now, host)
	}
	if f, err := n.file(); err != nil || f == nil {
		t.Fatalf("the prepared namespace was not left open: %v", err)
	}
}
