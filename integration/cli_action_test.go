package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/testutil"
)

// actionRun is one run of deploy/github/cordon-action.sh with a fake GitHub environment.
type actionRun struct {
	result
	summary, output string // $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT after the run
	report          string // where the report was asked for
}

// prRepo makes w's workspace a git repository whose main branch holds base as
// cordon.yaml and whose checked-out branch pr changes it to pr (the pull request);
// extra files (path → content, "->TARGET" for a symbolic link) are in both commits.
func prRepo(t *testing.T, w *world, base, pr string, extra map[string]string) {
	t.Helper()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = w.ws
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, content string) {
		p := filepath.Join(w.ws, name)
		os.Remove(p)
		if target, ok := strings.CutPrefix(content, "->"); ok {
			mustMkdir(t, filepath.Dir(p))
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return
		}
		mustWrite(t, p, content)
	}
	git("init", "-q", "-b", "main")
	for name, content := range extra {
		write(name, content)
	}
	write("cordon.yaml", base)
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	git("checkout", "-q", "-b", "pr")
	write("cordon.yaml", pr)
	git("add", "-A")
	git("commit", "-q", "--allow-empty", "-m", "the pull request")
}

// runAction runs the action's script in w's workspace the way action.yml does.
func runAction(t *testing.T, w *world, command string, env ...string) actionRun {
	t.Helper()
	tmp := shortTempDir(t)
	a := actionRun{report: filepath.Join(tmp, "report.html")}
	summary, output := filepath.Join(tmp, "summary.md"), filepath.Join(tmp, "output")
	script := filepath.Join(repoRoot(t), "deploy", "github", "cordon-action.sh")
	saved := w.env
	w.env = append(append([]string(nil), w.env...),
		"GITHUB_WORKSPACE="+w.ws, "GITHUB_BASE_REF=main", "GITHUB_HEAD_REF=pr", "CORDON_DEFAULT_BRANCH=main",
		"GITHUB_EVENT_NAME=pull_request", "GITHUB_STEP_SUMMARY="+summary, "GITHUB_OUTPUT="+output,
		"RUNNER_TEMP="+tmp, "CORDON_BIN="+testutil.Cordon(t), "CORDON_COMMAND="+command,
		"CORDON_REPORT="+a.report, "GIT_CONFIG_GLOBAL=/dev/null")
	w.env = append(w.env, env...)
	a.result = w.bash("exec bash " + shellQuote(script))
	w.env = saved
	s, _ := os.ReadFile(summary)
	o, _ := os.ReadFile(output)
	a.summary, a.output = string(s), string(o)
	return a
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

const (
	// baseWide lets the sandbox write the whole workspace.
	baseWide = "version: 1\nfilesystem:\n  writable: [\".\"]\n"
	// baseNarrow lets it write build/ only.
	baseNarrow = "version: 1\nfilesystem:\n  writable: [build]\n"
)

// TestActionNarrowingPR: a pull request that narrows the contract passes, its command
// runs (under the base's contract) and the HTML report is written.
func TestActionNarrowingPR(t *testing.T) {
	w := newWorld(t)
	prRepo(t, w, baseWide, baseNarrow, map[string]string{"build/.keep": ""})
	a := runAction(t, w, "echo ran > ran.txt")
	if a.code != 0 {
		t.Fatalf("narrowing PR: %v\nsummary: %s", a.result, a.summary)
	}
	if data, err := os.ReadFile(filepath.Join(w.ws, "ran.txt")); err != nil || string(data) != "ran\n" {
		t.Errorf("the command did not run under the base contract (which lets it write ran.txt): %q %v", data, err)
	}
	for _, want := range []string{"wider=false", "exit-code=0", "report=" + a.report} {
		assertContains(t, "GITHUB_OUTPUT", a.output, want)
	}
	assertContains(t, "summary", a.summary, "narrower")
	html, err := os.ReadFile(a.report)
	if err != nil {
		t.Fatalf("no report: %v", err)
	}
	assertContains(t, "report", string(html), "<h1>cordon run")
	assertContains(t, "report", string(html), "ran.txt")
	assertAbsent(t, filepath.Join(w.ws, ".cordon-base.yaml"))
}

// TestActionWideningPR: a pull request that widens the contract fails with the widening
// in the job summary, and its command runs under the BASE contract: the write the pull
// request's contract would allow is refused. With allow-widening the check passes, and
// the base contract is still the one in force.
func TestActionWideningPR(t *testing.T) {
	w := newWorld(t)
	prRepo(t, w, baseNarrow, baseWide, map[string]string{"build/.keep": ""})
	cmd := "echo ok > build/ok; if echo pwned > pwned.txt; then exit 0; fi; echo refused > build/refused"
	a := runAction(t, w, cmd)
	if a.code != 1 {
		t.Fatalf("widening PR: want exit 1, got %v\nsummary: %s", a.result, a.summary)
	}
	assertContains(t, "summary", a.summary, "wider: filesystem")
	assertContains(t, "summary", a.summary, "cordon.yaml:3:")
	assertContains(t, "summary", a.summary, "widens the contract")
	assertContains(t, "GITHUB_OUTPUT", a.output, "wider=true")
	assertContains(t, "stdout", a.stdout, "::error::")
	if len(forgedCommands(a.stdout, "widens the contract")) == 0 {
		t.Errorf("the script's own ::error:: line is inside a ::stop-commands:: region, GitHub would not read it:\n%s", a.stdout)
	}
	assertAbsent(t, filepath.Join(w.ws, "pwned.txt"))
	if _, err := os.Stat(filepath.Join(w.ws, "build", "refused")); err != nil {
		t.Errorf("the command did not run, or its write to build/ (which the base allows) failed: %v", err)
	}
	if _, err := os.Stat(a.report); err != nil {
		t.Errorf("no report for a failed check: %v", err)
	}

	os.Remove(filepath.Join(w.ws, "build", "refused"))
	a = runAction(t, w, cmd, "CORDON_ALLOW_WIDENING=true")
	if a.code != 0 {
		t.Fatalf("allowed widening: %v\nsummary: %s", a.result, a.summary)
	}
	assertContains(t, "GITHUB_OUTPUT", a.output, "wider=true")
	assertAbsent(t, filepath.Join(w.ws, "pwned.txt"))
	if _, err := os.Stat(filepath.Join(w.ws, "build", "refused")); err != nil {
		t.Errorf("with allow-widening the command must still run under the base contract: %v", err)
	}
}

// TestActionHostileCheckout: the pull request's checkout is the attacker's. A
// cordon.yaml (or its directory) that is a link to a host file is refused before cordon
// reads it, a .cordon-base.yaml it planted (a link to a host file) is replaced rather
// than written through, and a base ref that is not a branch name is refused.
func TestActionHostileCheckout(t *testing.T) {
	w := newWorld(t)
	victim := filepath.Join(shortTempDir(t), "victim")
	mustWrite(t, victim, "host file\n")
	prRepo(t, w, baseWide, baseWide, map[string]string{".cordon-base.yaml": "->" + victim, "ci/cordon.yaml": "->/etc/shadow"})
	a := runAction(t, w, "true")
	if a.code != 0 {
		t.Fatalf("same contract: %v\nsummary: %s", a.result, a.summary)
	}
	if data, _ := os.ReadFile(victim); string(data) != "host file\n" {
		t.Errorf("the planted .cordon-base.yaml link was written through: %q", data)
	}
	a = runAction(t, w, "true", "CORDON_CONTRACT=ci/cordon.yaml")
	if a.code != 2 || !strings.Contains(a.stderr, "symbolic link") {
		t.Errorf("a contract that is a link: want 2 and a refusal, got %v", a.result)
	}
	for _, bad := range []string{"../cordon.yaml", "/etc/shadow", "ci/../cordon.yaml"} {
		if a := runAction(t, w, "true", "CORDON_CONTRACT="+bad); a.code != 2 {
			t.Errorf("CORDON_CONTRACT=%s: want 2, got %v", bad, a.result)
		}
	}
	if a := runAction(t, w, "true", "CORDON_BASE_REF=main;touch x"); a.code != 2 {
		t.Errorf("a base ref that is not a branch name: want 2, got %v", a.result)
	}
}

// TestActionYAML: action.yml is a composite action that calls the tested script, uploads
// the report even when the step failed, and never expands an expression inside a shell
// script (inputs reach the scripts as environment variables: ${{ }} in a run: block is
// script injection); the GitLab example runs the same script from cordon's own checkout.
func TestActionYAML(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var action struct {
		Runs struct {
			Using string
			Steps []struct {
				Uses, Run, If string
				With          map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(data, &action); err != nil {
		t.Fatal(err)
	}
	if action.Runs.Using != "composite" {
		t.Errorf("runs.using: %q; want composite", action.Runs.Using)
	}
	var script, upload bool
	for _, s := range action.Runs.Steps {
		if strings.Contains(s.Run, "${{") {
			t.Errorf("an expression inside a run: block (pass it through env): %q", s.Run)
		}
		script = script || strings.Contains(s.Run, `"$GITHUB_ACTION_PATH/deploy/github/cordon-action.sh"`)
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			upload = strings.HasPrefix(s.If, "always()") && s.With["path"] != ""
		}
	}
	if !script || !upload {
		t.Errorf("action.yml: runs the script %v, uploads the report always %v", script, upload)
	}
	gl, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "gitlab", ".gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var pipeline map[string]any
	if err := yaml.Unmarshal(gl, &pipeline); err != nil {
		t.Fatalf("deploy/gitlab/.gitlab-ci.yml: %v", err)
	}
	assertContains(t, ".gitlab-ci.yml", string(gl), `bash "$CORDON_SRC/deploy/github/cordon-action.sh"`)
}

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

// TestActionStopsWorkflowCommandsFromThePR (red team): the job log is where GitHub
// reads workflow commands (::error::, ::warning::, ::add-mask::, ::stop-commands::).
// cordon diff's output, cordon's messages (which quote the pull request's contract raw,
// newlines included) and the sandboxed build's output are the pull request's: they are
// printed inside ::stop-commands::TOKEN, with a token that is new for each region.
func TestActionStopsWorkflowCommandsFromThePR(t *testing.T) {
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
	assertContains(t, "stdout", a.stdout, "FORGED-BY-BUILD") // the build's output is in the log, inert
	seen := map[string]bool{}
	for _, tok := range append(stopTokens(a.stdout), stopTokens(runAction(t, w, "sh build.sh").stdout)...) {
		if len(tok) != 32 || strings.Trim(tok, "0123456789abcdef") != "" || seen[tok] {
			t.Errorf("stop-commands token %q: want 32 hex digits, new for each region and run", tok)
		}
		seen[tok] = true
	}
	if len(seen) < 6 {
		t.Errorf("want 3 regions a run (diff, run, report), got tokens %v", seen)
	}
}

// stopTokens returns the tokens of a stream's ::stop-commands:: lines.
func stopTokens(stream string) []string {
	var toks []string
	for _, line := range strings.Split(stream, "\n") {
		if tok, ok := strings.CutPrefix(line, "::stop-commands::"); ok {
			toks = append(toks, tok)
		}
	}
	return toks
}

// TestActionBaseIsNotThePRsChoice (red team): the pull request's author picks the
// branch it targets (github.base_ref). A pull request against a branch with no
// cordon.yaml (gh-pages, an old release branch) or a wider one would run under that
// contract. The base is the repository's default branch, another only when
// protected-bases lists it; any other base is refused before anything runs.
func TestActionBaseIsNotThePRsChoice(t *testing.T) {
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
	if a.code != 2 || !strings.Contains(a.stderr, "legacy is neither the default branch (main) nor in protected-bases") {
		t.Errorf("a base outside protected-bases: want 2 and a refusal naming it, got %v", a.result)
	}
	if a := runAction(t, w, "true", "CORDON_BASE_REF=legacy", "CORDON_PROTECTED_BASES=release/*"); a.code != 2 {
		t.Errorf("a base no pattern matches: want 2, got %v", a.result)
	}
	if a := runAction(t, w, "true", "CORDON_DEFAULT_BRANCH="); a.code != 2 || !strings.Contains(a.stderr, "default branch is not known") {
		t.Errorf("no default branch and no origin/HEAD: want 2 and a refusal, got %v", a.result)
	}
	// A listed base (or the default branch itself) is the contract in force: legacy's
	// built-in default lets the build write the whole workspace.
	for _, env := range [][]string{
		{"CORDON_BASE_REF=legacy", "CORDON_PROTECTED_BASES=release/* leg*"},
		{"CORDON_BASE_REF=legacy", "CORDON_DEFAULT_BRANCH=legacy"},
	} {
		os.Remove(filepath.Join(w.ws, "outside-build"))
		if a := runAction(t, w, "touch outside-build", env...); a.code != 0 || !fileExists(filepath.Join(w.ws, "outside-build")) {
			t.Errorf("%v: want legacy's contract in force, got %v", env, a.result)
		}
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }
