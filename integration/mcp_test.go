package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// mcpConn is one `cordon mcp` process and the Go SDK's client session on it.
type mcpConn struct {
	t      *testing.T
	cs     *gomcp.ClientSession
	cmd    *exec.Cmd
	stderr *syncBuffer
}

// startMCP runs `cordon mcp` in the world's workspace and connects the SDK's client.
func (w *world) startMCP(extra ...string) *mcpConn {
	w.t.Helper()
	cmd := exec.Command(testutil.Cordon(w.t), append([]string{"mcp"}, extra...)...)
	cmd.Dir, cmd.Env = w.ws, w.env
	m := &mcpConn{t: w.t, cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = m.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := gomcp.NewClient(&gomcp.Implementation{Name: "cordon-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &gomcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
	if err != nil {
		w.t.Fatalf("connect: %v; stderr: %s", err, m.stderr)
	}
	m.cs = cs
	w.t.Cleanup(func() {
		_ = cs.Close()
		if cmd.ProcessState == nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	})
	return m
}

// call calls tool name and fails the test unless the answer comes within a minute.
func (m *mcpConn) call(name string, args any) *gomcp.CallToolResult {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.cs.CallTool(ctx, &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		m.t.Fatalf("%s: %v; stderr: %s", name, err, m.stderr)
	}
	return res
}

// ok calls tool name, wants no tool error and decodes its structured result into out.
func (m *mcpConn) ok(name string, args any, out any) string {
	m.t.Helper()
	res := m.call(name, args)
	txt := resultText(res)
	if res.IsError {
		m.t.Fatalf("%s %v: tool error: %s", name, args, txt)
	}
	if out != nil {
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, out); err != nil {
			m.t.Fatalf("%s: structured content %s: %v", name, data, err)
		}
	}
	return txt
}

// refused calls tool name and wants a tool error whose text holds every one of want.
func (m *mcpConn) refused(name string, args any, want ...string) string {
	m.t.Helper()
	res := m.call(name, args)
	txt := resultText(res)
	if !res.IsError {
		m.t.Fatalf("%s %v: want a tool error, got %s", name, args, txt)
	}
	m.t.Logf("%s %q: %s", name, trimArgs(args), txt)
	for _, s := range want {
		if !strings.Contains(txt, s) {
			m.t.Errorf("%s %v: the error %q does not say %q", name, args, txt, s)
		}
	}
	return txt
}

// trimArgs is args for a log line, its long strings cut.
func trimArgs(args any) string {
	s := fmtJSON(args)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func resultText(res *gomcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*gomcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// execResult is the part of exec's structured result the tests read.
type execResult struct {
	Schema    string `json:"schema"`
	Session   string `json:"session"`
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	SpillPath string `json:"spill_path"`
}

// sessionID runs a command to learn the connection's session.
func (m *mcpConn) sessionID() string {
	m.t.Helper()
	var r execResult
	m.ok("exec", map[string]any{"command": "true"}, &r)
	if audit.ValidateRunID(r.Session) != nil {
		m.t.Fatalf("exec named no session: %+v", r)
	}
	return r.Session
}

// TestMCPTools drives every tool of `cordon mcp` through the Go SDK's client, on bwrap.
func TestMCPTools(t *testing.T) {
	w := newWorld(t)
	m := w.startMCP()
	mcpTools(t, w, m)
}

func mcpTools(t *testing.T, w *world, m *mcpConn) {
	assertToolsListed(t, m)
	mcpToolCalls(t, w, m)
}

// assertToolsListed wants the six tools, each with a description, input and output
// schemas and honest annotations.
func assertToolsListed(t *testing.T, m *mcpConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lt, err := m.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	readOnly := map[string]bool{"exec": false, "read_file": true, "write_file": false, "edit_file": false, "list_files": true, "changes": false}
	if len(lt.Tools) != len(readOnly) {
		t.Errorf("want %d tools, got %d", len(readOnly), len(lt.Tools))
	}
	for _, tool := range lt.Tools {
		ro, known := readOnly[tool.Name]
		schema, _ := json.Marshal(tool.InputSchema)
		switch {
		case !known:
			t.Errorf("unexpected tool %s", tool.Name)
		case tool.Description == "" || tool.Annotations == nil || tool.OutputSchema == nil:
			t.Errorf("%s: no description, annotations or output schema", tool.Name)
		case tool.Annotations.ReadOnlyHint != ro:
			t.Errorf("%s: readOnlyHint %v; want %v", tool.Name, tool.Annotations.ReadOnlyHint, ro)
		case tool.Annotations.OpenWorldHint == nil || *tool.Annotations.OpenWorldHint != (tool.Name == "exec"):
			t.Errorf("%s: openWorldHint %v", tool.Name, tool.Annotations.OpenWorldHint)
		case !ro && (tool.Annotations.DestructiveHint == nil || !*tool.Annotations.DestructiveHint):
			t.Errorf("%s: it changes things, and its destructiveHint is not true", tool.Name)
		case tool.Name != "changes" && tool.Name != "list_files" && !strings.Contains(string(schema), `"required"`):
			t.Errorf("%s: an input schema with no required argument: %s", tool.Name, schema)
		}
	}
}

// mcpToolCalls calls every tool once or more and checks the host, the results and the
// session's log.
func mcpToolCalls(t *testing.T, w *world, m *mcpConn) {
	var r execResult
	txt := m.call("exec", map[string]any{"command": "pwd; echo oops >&2; exit 3"})
	data, _ := json.Marshal(txt.StructuredContent)
	_ = json.Unmarshal(data, &r)
	if !txt.IsError || r.Schema != "cordon.exec/v1" || r.ExitCode != 3 || r.Stdout != w.ws+"\n" || r.Stderr != "oops\n" {
		t.Errorf("exec: want a tool error with exit 3, the workspace and oops; got %+v %s", r, resultText(txt))
	}
	m.ok("exec", map[string]any{"command": "cat", "stdin": "piped\n"}, &r)
	if r.Stdout != "piped\n" {
		t.Errorf("exec stdin: got %q", r.Stdout)
	}

	m.ok("write_file", map[string]any{"path": "dir/a.txt", "content": "one\ntwo\nthree\n"}, nil)
	if got, _ := os.ReadFile(filepath.Join(w.ws, "dir", "a.txt")); string(got) != "one\ntwo\nthree\n" {
		t.Errorf("write_file wrote %q", got)
	}
	var rd struct {
		Content    string `json:"content"`
		StartLine  int    `json:"start_line"`
		EndLine    int    `json:"end_line"`
		TotalLines int    `json:"total_lines"`
	}
	m.ok("read_file", map[string]any{"path": "dir/a.txt", "offset": 2, "limit": 1}, &rd)
	if rd.Content != "two\n" || rd.StartLine != 2 || rd.EndLine != 2 {
		t.Errorf("read_file 2,1: %+v", rd)
	}
	m.ok("edit_file", map[string]any{"path": "dir/a.txt", "old_text": "two\n", "new_text": "TWO\n"}, nil)
	if got, _ := os.ReadFile(filepath.Join(w.ws, "dir", "a.txt")); string(got) != "one\nTWO\nthree\n" {
		t.Errorf("edit_file left %q", got)
	}
	m.refused("edit_file", map[string]any{"path": "dir/a.txt", "old_text": "four", "new_text": "x"}, "not found")
	m.refused("edit_file", map[string]any{"path": "dir/a.txt", "old_text": "e\n", "new_text": "x"}, "2 times")
	var ls struct {
		Entries []struct{ Path, Type string } `json:"entries"`
	}
	m.ok("list_files", map[string]any{"recursive": true}, &ls)
	if !strings.Contains(fmtJSON(ls), `"dir/a.txt"`) {
		t.Errorf("list_files: no dir/a.txt in %s", fmtJSON(ls))
	}
	var ch struct {
		Changed []string `json:"changed"`
	}
	m.ok("changes", nil, &ch)
	if !strings.Contains(strings.Join(ch.Changed, " "), "dir/a.txt") {
		t.Errorf("changes: no dir/a.txt in %v", ch.Changed)
	}
	id := r.Session
	m.close()
	w.assertSessionEnded(id)
	var fileCalls int
	for _, rec := range sessionEvents(t, w, id) {
		if rec.Type == "cmd.start" && strings.Contains(string(rec.Body), `"internal","file",`) {
			fileCalls++
		}
	}
	if fileCalls != 6 { // write, read, three edits, list
		t.Errorf("the log holds %d file tool commands; want 6", fileCalls)
	}
}

func fmtJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// close ends the connection as a client does: it closes the server's stdin.
func (m *mcpConn) close() {
	m.t.Helper()
	if err := m.cs.Close(); err != nil {
		m.t.Logf("close: %v", err)
	}
}

// assertSessionEnded waits until session id's supervisor and sandbox are gone, then
// wants its log sealed.
func (w *world) assertSessionEnded(id string) {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := os.Stat(filepath.Join(w.sessionsDir(), id+".json"))
		left := processesMatching(w.runRoot)
		if os.IsNotExist(err) && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("session %s still up a minute after its connection ended (record: %v): %s", id, err, describeProcesses(left))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 || !strings.Contains(v.stdout, "sealed") {
		w.t.Errorf("audit verify %s: %v", id, v)
	}
}

// TestMCPHostileAgent: an agent that calls every file tool with hostile arguments gets
// tool errors that say why, never a hang, and nothing outside the contract's reach.
func TestMCPHostileAgent(t *testing.T) {
	w := newWorld(t)
	mcpHostile(t, w)
}

func mcpHostile(t *testing.T, w *world) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret.txt"), "OUTSIDE-SECRET\n")
	mustWrite(t, filepath.Join(w.ws, "protected", "keep.txt"), "keep\n")
	mustWrite(t, filepath.Join(w.ws, "bin.dat"), "ab\x00cd\n")
	w.contract("version: 1\nfilesystem:\n  deny_write: [protected]\ncommands:\n  deny: [\"sh -c *forbidden*\"]\n")
	for name, target := range map[string]string{"outlink": outside, "keylink": filepath.Join(w.home, ".ssh", "id_rsa")} {
		if err := os.Symlink(target, filepath.Join(w.ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := linux.Mkfifo(filepath.Join(w.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := w.startMCP()
	id := m.sessionID()

	// Reads out of the workspace: through .., links, absolute paths.
	for _, p := range []string{"outlink/secret.txt", "keylink", "../home/.ssh/id_rsa", filepath.Join(outside, "secret.txt"), w.home + "/.ssh/id_rsa"} {
		txt := m.refused("read_file", map[string]any{"path": p})
		if strings.Contains(txt, "SECRET") || strings.Contains(txt, "secret-key-material") {
			t.Errorf("read_file %s: the secret came back: %s", p, txt)
		}
	}
	// Writes out of the writable set, each refused with the reason.
	for _, p := range []string{"protected/evil.txt", "/etc/cordon-evil"} {
		m.refused("write_file", map[string]any{"path": p, "content": "evil\n"}, "contract")
	}
	// Out of the workspace the sandbox may have a scratch file system of its own: the
	// write may succeed there, but never reaches the host (below).
	for _, p := range []string{"outlink/evil.txt", "../evil.txt", filepath.Join(outside, "evil.txt")} {
		m.call("write_file", map[string]any{"path": p, "content": "evil\n"})
	}
	m.refused("edit_file", map[string]any{"path": "protected/keep.txt", "old_text": "keep", "new_text": "evil"}, "contract")
	for _, p := range []string{filepath.Join(outside, "evil.txt"), filepath.Join(filepath.Dir(w.ws), "evil.txt"), filepath.Join(w.ws, "protected", "evil.txt")} {
		assertAbsent(t, p)
	}
	if got, _ := os.ReadFile(filepath.Join(w.ws, "protected", "keep.txt")); string(got) != "keep\n" {
		t.Errorf("protected/keep.txt became %q", got)
	}
	// NUL, binary, a FIFO, a huge write: refused at once.
	m.refused("read_file", map[string]any{"path": "a\x00b"}, "NUL")
	m.refused("write_file", map[string]any{"path": "x\x00/../../etc/passwd", "content": "x"}, "NUL")
	m.refused("exec", map[string]any{"command": "echo a\x00b"}, "NUL")
	m.refused("read_file", map[string]any{"path": "bin.dat"}, "binary")
	m.refused("read_file", map[string]any{"path": "fifo"}, "not a regular file")
	m.refused("write_file", map[string]any{"path": "fifo", "content": "x"}, "not a regular file")
	m.refused("write_file", map[string]any{"path": "huge", "content": strings.Repeat("h", 9<<20)}, "longer than")
	assertAbsent(t, filepath.Join(w.ws, "huge"))

	// A command the contract denies is refused before it starts, naming the rule.
	m.refused("exec", map[string]any{"command": "echo forbidden > made.txt"}, "sh -c *forbidden*")
	assertAbsent(t, filepath.Join(w.ws, "made.txt"))

	// A refused destination comes back with the rule that would allow it.
	txt := m.refused("exec", map[string]any{"command": "wget -q -O /dev/null http://denied.example:8080/"},
		"denied.example:8080 refused (not in network.allow)", "network.allow: [{host: denied.example, ports: [8080]}]")
	if !strings.Contains(txt, "exit ") {
		t.Errorf("the refusal's text has no outcome line: %q", txt)
	}

	// A huge output is cut at the cap, the whole of it spilled inside the sandbox.
	var r execResult
	m.ok("exec", map[string]any{"command": "yes cordon | head -c 3000000", "max_output_chars": 1000}, &r)
	if !r.Truncated || r.SpillPath == "" || len(r.Stdout) > 1200 {
		t.Errorf("a 3 MB output: truncated %v, spill %q, %d characters kept", r.Truncated, r.SpillPath, len(r.Stdout))
	}
	var rd struct {
		Content   string `json:"content"`
		Truncated bool   `json:"truncated"`
	}
	m.ok("read_file", map[string]any{"path": r.SpillPath, "offset": 100000, "limit": 2}, &rd)
	if rd.Content != "cordon\ncordon\n" {
		t.Errorf("read_file of the spill file at line 100000: %+v", rd)
	}
	m.close()
	w.assertSessionEnded(id)
}

// TestMCPConnectionEnds: however the connection ends, the session is stopped, nothing
// of it is left and its log is sealed.
func TestMCPConnectionEnds(t *testing.T) {
	for _, c := range connectionEnds {
		t.Run(c.name, func(t *testing.T) { mcpConnectionEnd(t, newWorld(t), c.end) })
	}
}

// connectionEnds are the ways an MCP connection ends.
var connectionEnds = []struct {
	name string
	end  func(m *mcpConn)
}{
	{"stdin closed", func(m *mcpConn) { m.close() }},
	{"SIGTERM", func(m *mcpConn) {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		_ = m.cs.Wait()  // the process closed its stdout: it has ended
		_ = m.cs.Close() // reaps it
		if st := m.cmd.ProcessState; st == nil || st.ExitCode() != 128+15 {
			m.t.Errorf("cordon mcp ended %v on SIGTERM; want exit 143", st)
		}
	}},
	{"SIGKILL", func(m *mcpConn) { _ = m.cmd.Process.Kill() }},
	// The client dies mid-call: its pipes close under a running command.
	{"client killed mid-call", func(m *mcpConn) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = m.cs.CallTool(ctx, &gomcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "sleep 600"}})
		m.close()
	}},
}

func mcpConnectionEnd(t *testing.T, w *world, end func(*mcpConn)) {
	m := w.startMCP()
	id := m.sessionID()
	end(m)
	w.assertSessionEnded(id)
}

// TestMCPContainers runs the tool, hostile-agent and connection-end tests on docker
// and containerd.
func TestMCPContainers(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) {
		t.Run("tools", func(t *testing.T) { w := newWorld(t); mcpTools(t, w, w.startMCP()) })
		t.Run("hostile", func(t *testing.T) { mcpHostile(t, newWorld(t)) })
		for _, c := range connectionEnds {
			t.Run(c.name, func(t *testing.T) { mcpConnectionEnd(t, newWorld(t), c.end) })
		}
	})
}

// TestMCPDocConfigs: every configuration block of docs/mcp.md (JSON mcpServers, Codex
// TOML) names a server that starts, answers the SDK's client and runs a command in
// its sandbox. A block's command must be cordon; the test runs the built one.
func TestMCPDocConfigs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	configs := mcpDocConfigs(t, string(data))
	if len(configs) < 2 {
		t.Fatalf("docs/mcp.md: %d configuration blocks found; want the JSON and the TOML one", len(configs))
	}
	for i, c := range configs {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			if c.command != "cordon" || len(c.args) < 1 || c.args[0] != "mcp" {
				t.Fatalf("the block names %q %q; want cordon mcp ...", c.command, c.args)
			}
			w := newWorld(t)
			file := w.contract("version: 1\n")
			args := slices.Clone(c.args[1:])
			for j, a := range args {
				if strings.HasSuffix(a, "cordon.yaml") {
					args[j] = file // an absolute path in the doc is the reader's project
				}
			}
			m := w.startMCP(args...)
			var r execResult
			m.ok("exec", map[string]any{"command": "echo configured"}, &r)
			if r.Stdout != "configured\n" {
				t.Errorf("exec through the documented server: %+v", r)
			}
			m.close()
			w.assertSessionEnded(r.Session)
		})
	}
}

// mcpDocConfig is one server a documented configuration starts.
type mcpDocConfig struct {
	command string
	args    []string
}

// mcpDocConfigs reads the json and toml blocks of a Markdown page.
func mcpDocConfigs(t *testing.T, md string) []mcpDocConfig {
	t.Helper()
	var out []mcpDocConfig
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
		if !ok || lang != "json" && lang != "toml" {
			continue
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		text := strings.Join(body, "\n")
		if lang == "json" {
			var doc struct {
				MCPServers map[string]struct {
					Command string   `json:"command"`
					Args    []string `json:"args"`
				} `json:"mcpServers"`
			}
			if err := json.Unmarshal([]byte(text), &doc); err != nil || len(doc.MCPServers) == 0 {
				t.Errorf("a json block of docs/mcp.md is no mcpServers configuration (%v):\n%s", err, text)
				continue
			}
			for _, s := range doc.MCPServers {
				out = append(out, mcpDocConfig{s.Command, s.Args})
			}
			continue
		}
		// The TOML block: command = "..." and args = [...], whose array is JSON's.
		var c mcpDocConfig
		for _, l := range body {
			k, v, _ := strings.Cut(l, "=")
			switch strings.TrimSpace(k) {
			case "command":
				_ = json.Unmarshal([]byte(strings.TrimSpace(v)), &c.command)
			case "args":
				_ = json.Unmarshal([]byte(strings.TrimSpace(v)), &c.args)
			}
		}
		out = append(out, c)
	}
	return out
}

// TestMCPStaged: with --stage the tools' writes land in the session's overlay, not in
// the workspace, until cordon apply lands them after the connection ends.
func TestMCPStaged(t *testing.T) {
	w := newWorld(t)
	m := w.startMCP("--stage")
	m.ok("write_file", map[string]any{"path": "staged.txt", "content": "staged\n"}, nil)
	var r execResult
	m.ok("exec", map[string]any{"command": "cat staged.txt"}, &r)
	if r.Stdout != "staged\n" {
		t.Errorf("the session does not see its own write: %+v", r)
	}
	assertAbsent(t, filepath.Join(w.ws, "staged.txt"))
	m.close()
	w.assertSessionEnded(r.Session)
	assertAbsent(t, filepath.Join(w.ws, "staged.txt"))
	if a := w.cordon("", "apply", r.Session); a.code != 0 {
		t.Fatalf("apply: %v", a)
	}
	if got, _ := os.ReadFile(filepath.Join(w.ws, "staged.txt")); string(got) != "staged\n" {
		t.Errorf("after apply the workspace holds %q", got)
	}
}
