package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestMCPTypeScript drives `cordon mcp` with the reference TypeScript SDK's client
// (integration/testdata/mcp-ts/client.mjs) over stdio, on bwrap, Docker and containerd:
// the calls an agent makes, then hostile ones, each of which must come back as a tool
// error or a capped result.
func TestMCPTypeScript(t *testing.T) {
	modules := tsClientModules(t)
	t.Run("bwrap", func(t *testing.T) { mcpTypeScript(t, newWorld(t), modules, "bwrap") })
	t.Run("containers", func(t *testing.T) {
		forEachContainerBackend(t, func(t *testing.T, b string) { mcpTypeScript(t, newWorld(t), modules, b) })
	})
}

// tsCall is one call of the client's summary: what came back, or the protocol error.
type tsCall struct {
	IsError      bool     `json:"isError"`
	Text         string   `json:"text"`
	Threw        string   `json:"threw"`
	Session      string   `json:"session"`
	ExitCode     *int     `json:"exit_code"`
	TimedOut     bool     `json:"timed_out"`
	Stdout       string   `json:"stdout"`
	StdoutLength int      `json:"stdoutLength"`
	Truncated    bool     `json:"truncated"`
	SpillPath    string   `json:"spill_path"`
	Content      string   `json:"content"`
	Entries      []string `json:"entries"`
	Changed      []string `json:"changed"`
}

// tsSummary is the client's one line of output.
type tsSummary struct {
	Tools []struct {
		Name         string `json:"name"`
		ReadOnly     bool   `json:"readOnly"`
		OutputSchema bool   `json:"outputSchema"`
	} `json:"tools"`
	Calls map[string]*tsCall `json:"calls"`
}

func mcpTypeScript(t *testing.T, w *world, modules, backend string) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret.txt"), "OUTSIDE-SECRET\n")
	mustWrite(t, filepath.Join(w.ws, "bin.dat"), "ab\x00cd\n")
	s, raw := runTSClient(t, w, modules, outside)
	defer func() {
		if t.Failed() {
			t.Logf("the client's summary: %s", raw)
		}
	}()

	var names []string
	for _, tool := range s.Tools {
		names = append(names, tool.Name)
		if !tool.OutputSchema {
			t.Errorf("tool %s: the TypeScript client sees no output schema", tool.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"changes", "edit_file", "exec", "list_files", "read_file", "write_file"}; !slices.Equal(names, want) {
		t.Errorf("tools listed: %v; want %v", names, want)
	}
	get := func(label string) *tsCall {
		c := s.Calls[label]
		if c == nil {
			t.Fatalf("the summary has no call %q: %s", label, fmtJSON(s))
		}
		return c
	}
	ok := func(label string) *tsCall {
		c := get(label)
		if c.IsError || c.Threw != "" {
			t.Errorf("%s: want a result, got a tool error or protocol error: %+v", label, c)
		}
		return c
	}
	refused := func(label string, want ...string) *tsCall {
		c := get(label)
		if !c.IsError {
			t.Errorf("%s: want a tool error, got %+v", label, c)
		}
		for _, needle := range want {
			if !strings.Contains(c.Text, needle) {
				t.Errorf("%s: the error %q does not say %q", label, c.Text, needle)
			}
		}
		if strings.Contains(c.Text, "SECRET") || strings.Contains(c.Text, "secret-key-material") {
			t.Errorf("%s: a secret came back: %q", label, c.Text)
		}
		return c
	}

	// What an agent does.
	e := ok("exec")
	if e.ExitCode == nil || *e.ExitCode != 0 || e.Stdout != "hi\n" || audit.ValidateRunID(e.Session) != nil {
		t.Errorf("exec echo hi: %+v", e)
	}
	ok("write_file")
	if got, _ := os.ReadFile(filepath.Join(w.ws, "ts", "a.txt")); string(got) != "from the ts client\n" {
		t.Errorf("write_file wrote %q", got)
	}
	if c := ok("read_file"); c.Content != "from the ts client\n" {
		t.Errorf("read_file: %+v", c)
	}
	if c := ok("list_files"); !slices.Contains(c.Entries, "ts/a.txt") {
		t.Errorf("list_files: no ts/a.txt in %v", c.Entries)
	}
	if c := ok("changes"); !strings.Contains(strings.Join(c.Changed, " "), "ts/a.txt") {
		t.Errorf("changes: no ts/a.txt in %v", c.Changed)
	}

	// Out of the workspace: through .., and through links the agent made with exec.
	if c := ok("mklinks"); c.Stdout != "made\n" {
		t.Errorf("exec ln -s: %+v", c)
	}
	for _, l := range []string{"outlink", "keylink", "rootlink"} {
		if fi, err := os.Lstat(filepath.Join(w.ws, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the agent's link %s is not in the workspace: %v", l, err)
		}
	}
	for _, l := range []string{"dotdot", "outlink", "keylink", "rootlink"} {
		refused(l)
	}
	// Writes out of the workspace may land on the sandbox's own scratch, never on the host.
	get("outlink_write")
	get("abs_write")
	assertAbsent(t, filepath.Join(outside, "evil.txt"))
	assertAbsent(t, filepath.Join(outside, "evil2.txt"))
	refused("keylink_edit")
	if c := ok("env"); c.Stdout != "done\n" {
		t.Errorf("the sandbox's environment holds the host's credentials: %+v", c)
	}
	get("environ")
	for label, c := range s.Calls {
		for _, secret := range []string{"OUTSIDE-SECRET", "secret-key-material", "aws-secret-value-123", "ghp_abcdef"} {
			if strings.Contains(c.Text+c.Stdout+c.Content, secret) {
				t.Errorf("%s: the host's secret %s came back: %+v", label, secret, c)
			}
		}
	}

	// Arguments no schema allows: a tool error or a protocol error, never a hang.
	for _, l := range []string{"bad_type", "no_tool"} {
		if c := get(l); !c.IsError && c.Threw == "" {
			t.Errorf("%s: want an error, got %+v", l, c)
		}
	}
	refused("nul", "NUL")
	refused("nul_exec", "NUL")
	refused("binary", "binary")
	refused("huge_write", "longer than")
	assertAbsent(t, filepath.Join(w.ws, "huge"))
	refused("long_path")
	if c := refused("hang"); !c.TimedOut {
		t.Errorf("sleep 600 with a 1 second timeout: %+v", c)
	}
	for i := range 4 {
		if c := ok("parallel" + strconv.Itoa(i)); c.Stdout != "p"+strconv.Itoa(i)+"\n" || c.Session != e.Session {
			t.Errorf("parallel call %d: %+v", i, c)
		}
	}
	big := ok("huge_exec")
	if !big.Truncated || big.SpillPath == "" || big.StdoutLength > 1200 {
		t.Errorf("a 3 MB output: truncated %v, spill %q, %d characters kept", big.Truncated, big.SpillPath, big.StdoutLength)
	}
	if c := ok("spill_read"); c.Content != "cordon\ncordon\n" {
		t.Errorf("read_file of the spill file at line 100000: %+v", c)
	}
	if c := ok("after"); c.Stdout != "still\n" || c.Session != e.Session {
		t.Errorf("the connection after the hostile calls: %+v (session %s)", c, e.Session)
	}
	w.assertSessionEnded(e.Session)
	// The session ran on the backend the test names.
	recs := sessionEvents(t, w, e.Session)
	if len(recs) == 0 || recs[0].Type != event.RunStart || !strings.Contains(string(recs[0].Body), `"backend":"`+backend+`"`) {
		first := "no record"
		if len(recs) > 0 {
			first = string(recs[0].Type) + " " + string(recs[0].Body)
		}
		t.Errorf("the session's log does not start on backend %s: %s", backend, first)
	}
}

// runTSClient runs the client on `cordon mcp` in the world's workspace and decodes its
// summary. The client bounds itself to 4 minutes; the test kills it at 5.
func runTSClient(t *testing.T, w *world, modules, outside string) (tsSummary, string) {
	t.Helper()
	node, err := exec.LookPath("node")
	testutil.Require(t, err == nil, "node (scripts/deps.sh installs it)")
	// The script sits beside a link to the cached node_modules, where ESM resolution
	// looks for the SDK.
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "integration", "testdata", "mcp-ts", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "client.mjs"), string(src))
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), outside, testutil.Cordon(t), "mcp")
	cmd.Dir, cmd.Env = w.ws, w.env
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var s tsSummary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("the client's summary: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return s, stdout.String()
}

var (
	tsModulesOnce sync.Once
	tsModulesDir  string
	tsModulesErr  string
)

// tsClientModules installs the client's package-lock.json with npm ci once into a
// cache directory keyed by the lock file's hash, and returns its node_modules. A cached
// install is reused; a new one is made beside it and renamed into place, so concurrent
// test binaries never see half of one.
func tsClientModules(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("node")
	testutil.Require(t, err == nil, "node (scripts/deps.sh installs it)")
	_, err = exec.LookPath("npm")
	testutil.Require(t, err == nil, "npm (scripts/deps.sh installs it)")
	tsModulesOnce.Do(func() { tsModulesDir, tsModulesErr = installTSModules(repoRoot(t)) })
	if tsModulesErr != "" {
		t.Fatal(tsModulesErr)
	}
	return tsModulesDir
}

func installTSModules(root string) (string, string) {
	src := filepath.Join(root, "integration", "testdata", "mcp-ts")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", err.Error()
	}
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		return "", err.Error()
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(append(append([]byte{}, pkg...), lock...))
	dir := filepath.Join(cache, "cordon-npm", hex.EncodeToString(sum[:8]))
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json")); err == nil {
		return modules, ""
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err.Error()
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		return "", err.Error()
	}
	defer os.RemoveAll(tmp)
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", err.Error()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = tmp
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "npm ci for the TypeScript SDK's client: " + err.Error() + "\n" + string(out)
	}
	// Another test binary may have put its install in place first: then use that one.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(modules, "@modelcontextprotocol", "sdk", "package.json")); serr != nil {
			return "", "placing the npm install: " + err.Error()
		}
	}
	return modules, ""
}
