//go:build k8s

package k8s

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/runner/container"
	"github.com/cordonhq/cordon/server/workspace"
)

// wsLimits bound the host's packing and syncing in these tests.
var wsLimits = workspace.Limits{Bytes: 256 << 20, Entries: 10000}

// hostWorkspace makes the plan's workspace a git repository with one commit, a few
// files and a hidden .env, as a session's host workspace is.
func hostWorkspace(t *testing.T, dir string) {
	t.Helper()
	for rel, data := range map[string]string{"README": "hello\n", "src/main.go": "package main\n", "src/old.txt": "old\n",
		"keep/stay.txt": "stay\n", "mv/from.txt": "moved\n", ".env": "SECRET=1\n"} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README", "src", "keep", "mv", "cordon.yaml"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// notHidden is what the fill holds: all but the plan's hidden .env.
func notHidden(rel string) bool { return rel != ".env" && !strings.HasPrefix(rel, ".env/") }

// writableFor is what the command may change in plan's workspace, as the runner
// would ask it: all but the paths the plan shows read-only (.git, cordon.yaml, the
// protected names) or hides (.env).
func writableFor(plan *contract.Plan) func(string) bool {
	var fixed []string
	for _, m := range container.ImageMounts(plan) {
		rel, ok := strings.CutPrefix(m.Path, plan.Workspace+"/")
		if ok && m.Access != contract.ReadWrite {
			fixed = append(fixed, rel)
		}
	}
	return func(rel string) bool {
		for _, f := range fixed {
			if rel == f || strings.HasPrefix(rel, f+"/") {
				return false
			}
		}
		return true
	}
}

// fill packs the host workspace (without .env) into the session's Pod.
func fill(ctx context.Context, ch *placement.Channel, dir string) error {
	pr, pw := io.Pipe()
	go func() {
		_, _, err := workspace.PackOnly(pw, dir, wsLimits, notHidden)
		pw.CloseWithError(err)
	}()
	err := ch.Fill(ctx, pr)
	pr.CloseWithError(errors.New("fill over"))
	return err
}

// tree is dir's paths and what each is (a file's content, "dir", "-> target"), .git
// and .env left out, for comparing.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".git" || rel == ".env" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case rel == ".":
		case d.Type()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			got[rel] = "-> " + to
		case d.IsDir():
			got[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			got[rel] = string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A session's Pod filled from a host workspace (a git repository, a hidden .env)
// shows its files to commands, .git still read-only to them; what a command then
// changes comes back through Pack and Sync exactly, and nothing else: .git and .env
// on the host are untouched, unchanged files keep their times. A second Fill is
// refused.
func TestPodWorkspaceFillPackSync(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	cfg.WorkspaceBytes = 64 << 20 // the pack's bound, for the sparse file below
	host := plan.Workspace
	hostWorkspace(t, host)
	writableRel := writableFor(plan)
	p, s := startPlaced(ctx, t, cs, plan, cfg)
	ch, err := p.Attach(ctx, rc, s, podspec.InitSpec(plan, cfg, podEnv))
	if err != nil {
		t.Fatalf("attaching: %v%s", err, describe(ctx, cs, ns, podspec.Name(s.ID)))
	}
	defer ch.Close()
	if err := fill(ctx, ch, host); err != nil {
		t.Fatalf("fill: %v", err)
	}
	if err := fill(ctx, ch, host); !errors.Is(err, placement.ErrFilled) {
		t.Errorf("a second fill: %v; want ErrFilled", err)
	}
	run := func(script string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code, err := ch.Run(ctx, []string{"/bin/sh", "-c", script}, host, nil, &out, &errOut)
		if err != nil || code != 0 {
			t.Fatalf("%s: status %d, %v\n%s%s", script, code, err, out.String(), errOut.String())
		}
		return out.String()
	}
	checkView(t, run)

	old := time.Unix(1_000_000, 0)
	for _, rel := range []string{"README", "keep/stay.txt"} {
		if err := os.Chtimes(filepath.Join(host, rel), old, old); err != nil {
			t.Fatal(err)
		}
	}
	before := tree(t, host)
	gitBefore := packedTar(t, filepath.Join(host, ".git"))
	run(`set -e
printf 'package main // edited\n' > src/main.go
echo new > src/new.txt
rm src/old.txt
mv mv/from.txt mv/to.txt
mkdir -p made/deep && echo deep > made/deep/f
ln -s ../README made/readme`)
	want := applied(before, map[string]string{"src/main.go": "package main // edited\n", "src/new.txt": "new\n", "mv/to.txt": "moved\n",
		"made": "dir", "made/deep": "dir", "made/deep/f": "deep\n", "made/readme": "-> ../README"}, "src/old.txt", "mv/from.txt")

	var packed bytes.Buffer
	if err := ch.Pack(ctx, &packed); err != nil {
		t.Fatalf("pack: %v", err)
	}
	st, err := workspace.Sync(bytes.NewReader(packed.Bytes()), host, wsLimits, writableRel)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	t.Logf("sync: %+v", st)
	if got := tree(t, host); !mapsEqual(got, want) {
		t.Errorf("after the sync the host workspace is\n%v\nwant\n%v", got, want)
	}
	if !bytes.Equal(packedTar(t, filepath.Join(host, ".git")), gitBefore) {
		t.Error("the host's .git changed")
	}
	if data, err := os.ReadFile(filepath.Join(host, ".env")); err != nil || string(data) != "SECRET=1\n" {
		t.Errorf("the host's .env: %q, %v", data, err)
	}
	for _, rel := range []string{"README", "keep/stay.txt"} {
		if fi, err := os.Stat(filepath.Join(host, rel)); err != nil || !fi.ModTime().Equal(old) {
			t.Errorf("%s, unchanged, was rewritten (%v)", rel, err)
		}
	}
	// 5 made (new.txt, to.txt, made, made/deep, made/deep/f, made/readme is 6) plus
	// main.go; removed old.txt and from.txt.
	if st.Changed != 7 || st.Removed != 2 {
		t.Errorf("sync stats %+v; want 7 changed, 2 removed", st)
	}

	hostile(ctx, t, ch, run, host, writableRel)
}

// checkView checks what a command sees of the filled workspace: the files, the
// commit in .git, .git and the contract read-only, .env masked.
func checkView(t *testing.T, run func(string) string) {
	t.Helper()
	out := run(`cat README src/main.go; cat .git/HEAD; ls .git/objects | wc -l | sed 's/^ */objects=/'
touch .git/x 2>/dev/null && echo git=written || echo git=refused
echo x 2>/dev/null >>.git/HEAD && echo head=written || echo head=refused
ls -A .env | wc -l | sed 's/^ */env=/'
head -1 cordon.yaml; echo x 2>/dev/null >>cordon.yaml && echo contract=written || echo contract=refused`)
	// cordon.yaml is a protected file: a subPath mount of a file the init container
	// made and the fill wrote in place.
	for _, want := range []string{"hello\npackage main\nref: refs/heads/main\n", "git=refused\n", "head=refused\n", "env=0\n",
		"version: 1\ncontract=refused\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the command's view: want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "objects=0\n") {
		t.Errorf("the commit's objects did not arrive in .git:\n%s", out)
	}
}

// hostile: a FIFO, a link to /etc/shadow, a 1 GiB sparse file (past the 64 MiB bound)
// and directories a background command keeps swapping for links make Pack neither
// hang, nor follow a link, nor pass its bound; Sync refuses the link.
func hostile(ctx context.Context, t *testing.T, ch *placement.Channel, run func(string) string, host string, writableRel func(string) bool) {
	run(`mkfifo fifo; ln -s /etc/shadow shadow; dd if=/dev/zero of=sparse bs=1 count=1 seek=1073741823 2>/dev/null; ls -ls sparse`)
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	err := ch.Pack(pctx, io.Discard)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("a pack past its bound: %v; want it refused as too large", err)
	}
	run(`rm sparse`)
	var b bytes.Buffer
	if err := ch.Pack(ctx, &b); err != nil {
		t.Fatalf("pack with a FIFO and a link out: %v", err)
	}
	names := tarNames(t, b.Bytes())
	if slices.Contains(names, "fifo") || !slices.Contains(names, "shadow") {
		t.Errorf("the pack holds %q; want the link, not the FIFO", names)
	}
	st, err := workspace.Sync(bytes.NewReader(b.Bytes()), host, wsLimits, writableRel)
	if err != nil || !slices.Contains(st.RefusedPaths, "shadow") {
		t.Errorf("sync of a link to /etc/shadow: %+v, %v; want it refused", st, err)
	}
	if _, err := os.Lstat(filepath.Join(host, "shadow")); err == nil {
		t.Error("the link to /etc/shadow was made on the host")
	}

	// A background command swaps race/d for a link to /etc and back as fast as it
	// can while the Pod is packed: no pack may hold anything of /etc.
	run(`mkdir -p race/d && echo in > race/d/inner
(while :; do mv race/d race/e; ln -s /etc race/d; rm race/d; mv race/e race/d; done) </dev/null >/dev/null 2>&1 &`)
	ok := 0
	for range 8 {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var b bytes.Buffer
		err := ch.Pack(pctx, &b)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("a pack racing renames hung")
		}
		if err != nil {
			continue // the race made it fail: it is retried, never taken
		}
		ok++
		for _, n := range tarNames(t, b.Bytes()) {
			if strings.HasPrefix(n, "race/") && !slices.Contains([]string{"race/", "race/d", "race/d/", "race/d/inner", "race/e", "race/e/", "race/e/inner"}, n) {
				t.Errorf("a pack racing renames holds %q", n)
			}
		}
	}
	t.Logf("%d of 8 racing packs came whole", ok)
}

func packedTar(t *testing.T, dir string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, _, err := workspace.Pack(&b, dir, wsLimits); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func tarNames(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

// applied is base with set applied and del removed.
func applied(base, set map[string]string, del ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range set {
		out[k] = v
	}
	for _, k := range del {
		delete(out, k)
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A Fill after a command ran is refused, and the session goes on.
func TestPodWorkspaceFillLate(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	p, s := startPlaced(ctx, t, cs, plan, cfg)
	ch, err := p.Attach(ctx, rc, s, podspec.InitSpec(plan, cfg, podEnv))
	if err != nil {
		t.Fatalf("attaching: %v%s", err, describe(ctx, cs, ns, podspec.Name(s.ID)))
	}
	defer ch.Close()
	if code, err := ch.Run(ctx, []string{"/bin/true"}, plan.Workspace, nil, nil, nil); err != nil || code != 0 {
		t.Fatalf("a command: %d, %v", code, err)
	}
	if err := fill(ctx, ch, plan.Workspace); !errors.Is(err, placement.ErrFillLate) {
		t.Errorf("a fill after a command: %v; want ErrFillLate", err)
	}
	var b bytes.Buffer
	if err := ch.Pack(ctx, &b); err != nil || len(tarNames(t, b.Bytes())) == 0 {
		t.Errorf("a pack after the refused fills: %v, %d bytes", err, b.Len())
	}
}
