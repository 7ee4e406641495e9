package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// forgedCommands returns the lines of a job log stream that GitHub would take as
// workflow commands (a line starting with "::") and that contain mark, outside a
// ::stop-commands::TOKEN ... ::TOKEN:: region.
func forgedCommands(stream, mark string) []string {
	var bad []string
	stop := ""
	for _, line := range strings.Split(stream, "\n") {
		switch {
		case stop != "" && line == "::"+stop+"::":
			stop = ""
		case stop != "":
		case strings.HasPrefix(line, "::stop-commands::"):
			stop = strings.TrimPrefix(line, "::stop-commands::")
		case strings.HasPrefix(line, "::") && strings.Contains(line, mark):
			bad = append(bad, line)
		}
	}
	return bad
}

// TestRedActionWorkflowCommandsFromThePR (red team, fails today): the job log is where
// GitHub reads workflow commands (::error::, ::warning::, ::add-mask::,
// ::stop-commands::). The script prints cordon diff's output as is, and cordon's error
// for a contract path quotes the pull request's path raw, newlines included; the
// sandboxed build's own output goes to the log too. So the pull request writes
// annotations ("contract is narrower") or stops the script's own ::error:: line from
// being read. The script should print untrusted text inside ::stop-commands::.
func TestRedActionWorkflowCommandsFromThePR(t *testing.T) {
	w := newWorld(t)
	pr := "version: 1\nfilesystem:\n  writable: [\"a\\n::warning title=cordon::FORGED-BY-CONTRACT\\n\"]\n"
	prRepo(t, w, baseWide, pr, map[string]string{"build.sh": "echo '::notice title=cordon::FORGED-BY-BUILD'\n"})
	a := runAction(t, w, "sh build.sh")
	for _, s := range []struct{ name, stream, mark string }{
		{"stdout", a.stdout, "FORGED-BY-CONTRACT"}, {"stderr", a.stderr, "FORGED-BY-CONTRACT"},
		{"stdout", a.stdout, "FORGED-BY-BUILD"}, {"stderr", a.stderr, "FORGED-BY-BUILD"},
	} {
		if bad := forgedCommands(s.stream, s.mark); len(bad) > 0 {
			t.Errorf("the pull request wrote workflow commands into the job log (%s): %q", s.name, bad)
		}
	}
}

// TestRedActionPullRequestChoosesItsBase (red team, fails today): the contract in force
// is the base branch's, and the base branch is github.base_ref, which the pull
// request's author picks among the repository's branches. A pull request opened
// against a branch with no cordon.yaml (gh-pages, an old release branch) or a wider one
// runs under that contract, not main's. The action should take its base from the
// repository's default branch (or a configured list) and say so in the docs.
func TestRedActionPullRequestChoosesItsBase(t *testing.T) {
	w := newWorld(t)
	prRepo(t, w, baseNarrow, baseNarrow, map[string]string{"build/.keep": ""})
	if runAction(t, w, "touch outside-build"); fileExists(filepath.Join(w.ws, "outside-build")) {
		t.Fatal("control: main's contract let the build write outside build/")
	}
	r := w.bash("git -c user.name=t -c user.email=t@example.com checkout -q --orphan legacy main && " +
		"git rm -q --cached cordon.yaml && rm cordon.yaml && " +
		"git -c user.name=t -c user.email=t@example.com commit -q -m legacy && git checkout -q -f pr")
	if r.code != 0 {
		t.Fatalf("making the legacy branch: %v", r)
	}
	a := runAction(t, w, "touch outside-build", "CORDON_BASE_REF=legacy")
	if fileExists(filepath.Join(w.ws, "outside-build")) {
		t.Errorf("a pull request against 'legacy' ran under that branch's (default) contract, not main's: it wrote outside build/ (exit %d)", a.code)
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }
