package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/sandboxinit/fileop"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// fakeSession runs the file helper in this process (no sandbox) and answers exec
// with a canned result, recording every call.
type fakeSession struct {
	mu    sync.Mutex
	calls [][]string
	opts  []session.ExecOptions
	exec  func(argv []string) (*wire.Result, error) // nil: exit 0
	turn  session.Turn
}

func (f *fakeSession) ID() string { return "20260101T000000Z-abcdef" }

func (f *fakeSession) Exec(ctx context.Context, argv []string, o session.ExecOptions) (*wire.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, argv)
	f.opts = append(f.opts, o)
	f.mu.Unlock()
	if len(argv) > 3 && argv[1] == "internal" && argv[2] == fileop.Arg {
		var stdin io.Reader = strings.NewReader("")
		if o.Stdin != nil {
			stdin = o.Stdin
		}
		var out bytes.Buffer
		code := fileop.Main(argv[3:], stdin, &out)
		return &wire.Result{V: wire.ResultVersion, Session: f.ID(), ExitCode: code, Stdout: out.String()}, nil
	}
	if f.exec != nil {
		return f.exec(argv)
	}
	return &wire.Result{V: wire.ResultVersion, Session: f.ID()}, nil
}

func (f *fakeSession) Sweep(context.Context) (session.Turn, error) { return f.turn, nil }

// connect serves New(sess) in memory and returns a client session on it.
func connect(t *testing.T, sess Session) *gomcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, ct := gomcp.NewInMemoryTransports()
	ss, err := New(sess, Options{Version: "test"}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *gomcp.ClientSession, name string, args any) (*gomcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*gomcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return res, b.String()
}

func TestToolsListed(t *testing.T) {
	cs := connect(t, &fakeSession{})
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		in, _ := json.Marshal(tool.InputSchema)
		out, _ := json.Marshal(tool.OutputSchema)
		if tool.Description == "" || tool.Annotations == nil || !strings.Contains(string(in), `"properties"`) && tool.Name != "changes" || len(out) < 10 {
			t.Errorf("%s: description %q, annotations %v, input %s, output %s", tool.Name, tool.Description, tool.Annotations, in, out)
		}
	}
	slices.Sort(names)
	if want := []string{"changes", "edit_file", "exec", "list_files", "read_file", "write_file"}; !slices.Equal(names, want) {
		t.Errorf("tools %v; want %v", names, want)
	}
}

func TestExec(t *testing.T) {
	f := &fakeSession{exec: func(argv []string) (*wire.Result, error) {
		return &wire.Result{V: 1, Session: "s", ExitCode: 2, Stdout: "out", Stderr: "err\n", Truncated: true, SpillPath: "/run/cordon/spill/1.out",
			Denied: []wire.Denial{{Destination: "evil.example:443", Reason: "no rule allows it", SuggestedRule: "network.allow: [evil.example:443]"}}}, nil
	}}
	cs := connect(t, f)
	res, txt := callTool(t, cs, "exec", map[string]any{"command": "make test", "stdin": "in", "timeout_seconds": 5})
	if !res.IsError {
		t.Error("a non-zero exit is not a tool error")
	}
	for _, want := range []string{"exit 2", "stdout:\nout\n", "stderr:\nerr\n", "/run/cordon/spill/1.out", "evil.example:443", "network.allow: [evil.example:443]"} {
		if !strings.Contains(txt, want) {
			t.Errorf("the text %q does not say %q", txt, want)
		}
	}
	var out ExecOutput
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &out); err != nil || out.Schema != ExecSchema || out.ExitCode != 2 || out.Alerts == nil {
		t.Errorf("structured content %s: %v", data, err)
	}
	if got := f.calls[0]; !slices.Equal(got, []string{"/bin/sh", "-c", "make test"}) {
		t.Errorf("argv %q", got)
	}
	if o := f.opts[0]; o.Cap != DefaultOutputChars || o.Timeout != 5*time.Second || o.Stdin == nil {
		t.Errorf("exec options %+v", o)
	}

	f.exec = func([]string) (*wire.Result, error) {
		return nil, &session.Error{Code: 125, Msg: "session x is dead"}
	}
	if res, txt := callTool(t, cs, "exec", map[string]any{"command": "true"}); !res.IsError || !strings.Contains(txt, "session x is dead") {
		t.Errorf("cordon's refusal: %v %q", res.IsError, txt)
	}
	for _, bad := range []map[string]any{
		{"command": ""}, {"command": "a\x00b"}, {"command": "true", "max_output_chars": MaxOutputChars + 1},
		{"command": "true", "timeout_seconds": -1}, {"command": strings.Repeat("x", MaxCommand+1)}, {"command": "true", "dir": "/a\x00"}, {"command": "true", "dir": "sub"},
		{"command": "true", "extra": 1},
	} {
		n := len(f.calls)
		if res, txt := callTool(t, cs, "exec", bad); !res.IsError || len(f.calls) != n {
			t.Errorf("exec %.80v: ran, or no tool error (%q)", bad, txt)
		}
	}
}

func TestFileTools(t *testing.T) {
	f := &fakeSession{}
	cs := connect(t, f)
	p := filepath.Join(t.TempDir(), "d", "f.go")
	if res, txt := callTool(t, cs, "write_file", map[string]any{"path": p, "content": "package a\n\nvar x = 1\n"}); res.IsError {
		t.Fatal(txt)
	}
	if got := f.calls[0]; !slices.Equal(got, []string{"/run/cordon/cordon", "internal", "file", "write", "--", p}) {
		t.Errorf("write argv %q", got)
	}
	if res, txt := callTool(t, cs, "edit_file", map[string]any{"path": p, "old_text": "x = 1", "new_text": "x = 2"}); res.IsError {
		t.Fatal(txt)
	}
	res, txt := callTool(t, cs, "read_file", map[string]any{"path": p, "offset": 3})
	if res.IsError || txt != "var x = 2\n" {
		t.Errorf("read_file: %v %q", res.IsError, txt)
	}
	if res, txt := callTool(t, cs, "read_file", map[string]any{"path": p, "offset": 9}); res.IsError || txt != "[no line from 9; the file has 3]" {
		t.Errorf("read_file past the end: %v %q", res.IsError, txt)
	}
	if res, txt := callTool(t, cs, "list_files", map[string]any{"path": filepath.Dir(p)}); res.IsError || txt != "f.go\n" {
		t.Errorf("list_files: %v %q", res.IsError, txt)
	}
	if res, txt := callTool(t, cs, "edit_file", map[string]any{"path": p, "old_text": "nothing", "new_text": "y"}); !res.IsError || !strings.Contains(txt, "not found") {
		t.Errorf("an edit of absent text: %v %q", res.IsError, txt)
	}
	n := len(f.calls)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": ""}},
		{"read_file", map[string]any{"path": "a\x00b"}},
		{"read_file", map[string]any{"path": "x", "max_chars": fileop.MaxReadChars + 1}},
		{"write_file", map[string]any{"path": strings.Repeat("a", 4097), "content": ""}},
		{"write_file", map[string]any{"path": "x"}},
		{"edit_file", map[string]any{"path": "x", "old_text": "", "new_text": "y"}},
		{"list_files", map[string]any{"max_entries": fileop.MaxEntries + 1}},
	} {
		if res, txt := callTool(t, cs, c.tool, c.args); !res.IsError {
			t.Errorf("%s %.60v: no tool error (%q)", c.tool, c.args, txt)
		}
	}
	if len(f.calls) != n {
		t.Errorf("refused calls ran %d command(s)", len(f.calls)-n)
	}
}

// TestHelperAnswerDistrusted: what the helper prints comes from inside the sandbox;
// an answer that is cut, not JSON, or failed is an error, never parsed as a result.
func TestHelperAnswerDistrusted(t *testing.T) {
	for _, c := range []struct {
		name string
		res  wire.Result
		want string
	}{
		{"cut", wire.Result{Stdout: `{"read":{"content":"x"`, Truncated: true}, "refused"},
		{"not JSON", wire.Result{Stdout: "hello", ExitCode: 127, Stderr: "not found"}, "exit 127"},
		{"failed with an answer", wire.Result{Stdout: `{"read":{"content":"x"}}`, ExitCode: 1}, "exit 1"},
		{"empty answer", wire.Result{Stdout: `{}`}, "no answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeSession{}
			tl := &tools{sess: helperStub{f, c.res}, o: Options{Helper: "/h"}}
			if _, _, err := tl.read(context.Background(), nil, ReadInput{Path: "a"}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v; want it to say %q", err, c.want)
			}
		})
	}
}

// helperStub answers every command with res.
type helperStub struct {
	*fakeSession
	res wire.Result
}

func (h helperStub) Exec(context.Context, []string, session.ExecOptions) (*wire.Result, error) {
	r := h.res
	return &r, nil
}

func TestChanges(t *testing.T) {
	cs := connect(t, &fakeSession{turn: session.Turn{Removed: 2, Changed: []string{"a.go", "b/c.go"}}})
	res, txt := callTool(t, cs, "changes", map[string]any{})
	var out ChangesOutput
	data, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(data, &out)
	if res.IsError || out.RemovedSpillFiles != 2 || !slices.Equal(out.Changed, []string{"a.go", "b/c.go"}) || !strings.Contains(txt, "b/c.go") {
		t.Errorf("changes: %s %q", data, txt)
	}
}

// TestCallsBounded: a call past MaxCalls is refused at once, never queued, and the
// slots come back when calls end.
func TestCallsBounded(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	f := &fakeSession{exec: func([]string) (*wire.Result, error) {
		started <- struct{}{}
		<-release
		return &wire.Result{}, nil
	}}
	st, ct := gomcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := New(f, Options{MaxCalls: 2}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); callTool(t, cs, "exec", map[string]any{"command": "sleep"}) }()
	}
	<-started
	<-started
	if res, txt := callTool(t, cs, "exec", map[string]any{"command": "one more"}); !res.IsError || !strings.Contains(txt, "at most 2") {
		t.Errorf("a third call: %v %q", res.IsError, txt)
	}
	if res, txt := callTool(t, cs, "changes", map[string]any{}); !res.IsError || !strings.Contains(txt, "at most 2") {
		t.Errorf("changes past the bound: %v %q", res.IsError, txt)
	}
	close(release)
	wg.Wait()
	if res, txt := callTool(t, cs, "exec", map[string]any{"command": "after"}); res.IsError {
		t.Errorf("a call after the others ended: %q", txt)
	}
}

// stagedSession is a fakeSession that keeps checkpoints.
type stagedSession struct {
	fakeSession
	names []string
}

func (s *stagedSession) Checkpoint(_ context.Context, name string) (wire.Checkpoint, []string, error) {
	s.names = append(s.names, name)
	return wire.Checkpoint{N: len(s.names), Name: name, Copied: 1}, nil, nil
}

func (s *stagedSession) Rollback(_ context.Context, to string) (wire.Checkpoint, []string, []string, error) {
	if to != "1" {
		return wire.Checkpoint{}, nil, nil, &session.Error{Msg: "no checkpoint " + to}
	}
	return wire.Checkpoint{N: 1}, []string{"a.txt"}, nil, nil
}

func listed(t *testing.T, cs *gomcp.ClientSession) map[string]*gomcp.Tool {
	t.Helper()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*gomcp.Tool{}
	for _, tool := range lt.Tools {
		out[tool.Name] = tool
	}
	return out
}

func connectWith(t *testing.T, sess Session, o Options) *gomcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, ct := gomcp.NewInMemoryTransports()
	ss, err := New(sess, o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := gomcp.NewClient(&gomcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestStagedAndGateToolsListedOnlyWhenServed: checkpoint and rollback need Stage and a
// Staged session, gate needs a gate.
func TestStagedAndGateToolsListedOnlyWhenServed(t *testing.T) {
	for _, c := range []struct {
		name string
		sess Session
		o    Options
		want []string
	}{
		{"plain", &fakeSession{}, Options{}, nil},
		{"stage flag, plain session", &fakeSession{}, Options{Stage: true}, nil},
		{"staged session, no flag", &stagedSession{}, Options{}, nil},
		{"staged", &stagedSession{}, Options{Stage: true}, []string{"checkpoint", "rollback"}},
		{"gates", &fakeSession{}, Options{Gates: []Gate{{Name: "push", Why: "publish"}}}, []string{"gate"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tools := listed(t, connectWith(t, c.sess, c.o))
			for _, name := range []string{"checkpoint", "rollback", "gate"} {
				if (tools[name] != nil) != slices.Contains(c.want, name) {
					t.Errorf("%s listed: %v; want %v", name, tools[name] != nil, slices.Contains(c.want, name))
				}
			}
			if g := tools["gate"]; g != nil {
				in, _ := json.Marshal(g.InputSchema)
				if !strings.Contains(string(in), `"enum":["push"]`) || !strings.Contains(g.Description, "push: publish") {
					t.Errorf("gate: schema %s, description %q", in, g.Description)
				}
			}
		})
	}
}

func TestCheckpointRollback(t *testing.T) {
	s := &stagedSession{}
	cs := connectWith(t, s, Options{Stage: true})
	res, txt := callTool(t, cs, "checkpoint", map[string]any{"name": "first"})
	if res.IsError || !strings.Contains(txt, "checkpoint 1 (first)") || !slices.Equal(s.names, []string{"first"}) {
		t.Errorf("checkpoint: %v %q %v", res.IsError, txt, s.names)
	}
	res, txt = callTool(t, cs, "rollback", map[string]any{"to": "1"})
	if res.IsError || !strings.Contains(txt, "a.txt") {
		t.Errorf("rollback: %v %q", res.IsError, txt)
	}
	for _, args := range []map[string]any{{"to": "9"}, {"to": ""}, {"to": "a\nb"}} {
		if res, txt := callTool(t, cs, "rollback", args); !res.IsError {
			t.Errorf("rollback %v: not an error: %q", args, txt)
		}
	}
	if res, _ := callTool(t, cs, "checkpoint", map[string]any{"name": strings.Repeat("x", 200)}); !res.IsError || len(s.names) != 1 {
		t.Errorf("a 200-byte name reached the session: %v", s.names)
	}
}

func TestGateRunsTheHelper(t *testing.T) {
	f := &fakeSession{exec: func(argv []string) (*wire.Result, error) {
		return &wire.Result{V: 1, ExitCode: 1, Gates: []gatewire.Decided{{Request: "r1", Gate: "push", Outcome: &gatewire.Outcome{By: "ann", Why: "not today"}}}}, nil
	}}
	cs := connectWith(t, f, Options{Gates: []Gate{{Name: "push"}}})
	res, txt := callTool(t, cs, "gate", map[string]any{"name": "push"})
	if !res.IsError || !strings.Contains(txt, "not today") {
		t.Errorf("denied gate: %v %q", res.IsError, txt)
	}
	if len(f.calls) != 1 || !slices.Equal(f.calls[0][1:], []string{"internal", "gate-request", "push"}) {
		t.Errorf("gate ran %q", f.calls)
	}
	if res, err := cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: "gate", Arguments: map[string]any{"name": "release"}}); err == nil && !res.IsError {
		t.Error("a gate not in the list was served")
	}
	if len(f.calls) != 1 {
		t.Errorf("an unlisted gate ran: %q", f.calls)
	}
}

// TestGateOutputIsTheHosts: the gate tool's result is the host gate service's account
// of the helper command's requests, never what the helper printed or exited with: a
// helper another command traced into exiting 0, or printing an approval, approves
// nothing.
func TestGateOutputIsTheHosts(t *testing.T) {
	approved := func(code int) *gatewire.Outcome {
		return &gatewire.Outcome{Approved: true, By: "ann", ExitCode: code, Output: "pushed\n"}
	}
	push := func(o *gatewire.Outcome) gatewire.Decided {
		return gatewire.Decided{Request: "r1", Gate: "push", Outcome: o}
	}
	for _, c := range []struct {
		name     string
		res      wire.Result
		approved bool
		code     int
		message  string
	}{
		{"the helper exits 0 and says so, no request", wire.Result{ExitCode: 0, Stdout: "pushed\n", Stderr: "approved by ann\n"}, false, 1, "no request from this call"},
		{"approved, the helper made to exit 1", wire.Result{ExitCode: 1, Gates: []gatewire.Decided{push(approved(0))}}, true, 0, "approved by ann"},
		{"approved, the operation failed", wire.Result{ExitCode: 0, Gates: []gatewire.Decided{push(approved(3))}}, false, 3, "approved by ann"},
		{"denied, the helper made to exit 0", wire.Result{ExitCode: 0, Gates: []gatewire.Decided{push(&gatewire.Outcome{By: "bob", Why: "no"})}}, false, 1, "denied by bob: no"},
		{"two requests", wire.Result{Gates: []gatewire.Decided{push(approved(0)), push(approved(0))}}, false, 1, "2 request(s)"},
		{"one kept, one more", wire.Result{Gates: []gatewire.Decided{push(approved(0))}, GatesMore: 1}, false, 1, "2 request(s)"},
		{"another gate", wire.Result{Gates: []gatewire.Decided{{Request: "r1", Gate: "deploy", Outcome: approved(0)}}}, false, 1, "1 request(s)"},
		{"withdrawn", wire.Result{ExitCode: 124, TimedOut: true, Gates: []gatewire.Decided{{Request: "r1", Gate: "push", Error: "withdrawn"}}}, false, 1, "withdrawn"},
		{"no gates in the sandbox", wire.Result{ExitCode: 125, Stderr: "cordon: this sandbox has no gates\n"}, false, 125, "the helper said: cordon: this sandbox has no gates"},
	} {
		out := gateOutput("push", &c.res)
		if out.Approved != c.approved || out.ExitCode != c.code || !strings.Contains(out.Message, c.message) {
			t.Errorf("%s: %+v; want approved %v, exit %d, a message with %q", c.name, out, c.approved, c.code, c.message)
		}
		if !c.approved && out.Output != "" && c.code != 3 {
			t.Errorf("%s: output %q of no operation the host ran", c.name, out.Output)
		}
	}
}

// TestShown: a path with a control character or bytes not UTF-8 is quoted in a tool's
// text, so a name cannot forge a line or carry a terminal escape; others are as they are.
func TestShown(t *testing.T) {
	for p, want := range map[string]string{
		"src/main.go":          "src/main.go",
		"dir with space/ü.txt": "dir with space/ü.txt",
		"n\x1b[31m\nforged":    `"n\x1b[31m\nforged"`,
		"bad\xff":              `"bad\xff"`,
		"tab\there":            `"tab\there"`,
		"bell\a":               `"bell\a"`,
		"del\x7f":              `"del\x7f"`,
		"c1\u009b31m":          `"c1\u009b31m"`,
	} {
		if got := shown(p); got != want {
			t.Errorf("shown(%q) = %s; want %s", p, got, want)
		}
	}
	if got := lines([]string{"a", "b\nc"}); got != "a\n\"b\\nc\"" {
		t.Errorf("lines: %q", got)
	}
}

// TestExecSummaryHostileNames: a destination the sandbox named and a path it touched
// reach exec's text quoted, neither forging a line nor carrying an escape.
func TestExecSummaryHostileNames(t *testing.T) {
	r := &wire.Result{
		Denied: []wire.Denial{{Destination: "[ev\x1b[31m\nnetwork: forged\a.e]:443", Reason: "malformed request"}},
		Alerts: []wire.Alert{{Category: "credential", Target: "/home/x/\x1b]0;t\a\nmonitor: fake", Syscall: "openat", Count: 1}},
	}
	got := execSummary(r)
	if strings.ContainsAny(got, "\x1b\a") || strings.Contains(got, "\nnetwork: forged") || strings.Contains(got, "\nmonitor: fake") {
		t.Errorf("exec's text carries the sandbox's names raw:\n%q", got)
	}
}

// TestFileHelperWithinContractTimeout: the file tools' helper runs for at most the
// contract's commands.timeout when it is shorter than the helper's own bound (rt7 saw
// it given 2 minutes whatever the contract said), and for its own bound otherwise.
func TestFileHelperWithinContractTimeout(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ contract, want time.Duration }{{3 * time.Second, 3 * time.Second}, {time.Hour, helperTimeout}} {
		f := &fakeSession{}
		cs := connectWith(t, f, Options{Version: "test", MaxTimeout: c.contract})
		if res, txt := callTool(t, cs, "read_file", map[string]any{"path": p}); res.IsError {
			t.Fatalf("read_file: %s", txt)
		}
		if len(f.opts) != 1 || f.opts[0].Timeout != c.want {
			t.Errorf("under a %s contract timeout the helper ran with %v; want one call with %s", c.contract, f.opts, c.want)
		}
	}
}
