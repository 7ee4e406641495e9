package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/testutil"
)

// toolsOf lists the connection's tools by name.
func (m *mcpConn) toolsOf() map[string]*gomcp.Tool {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lt, err := m.cs.ListTools(ctx, nil)
	if err != nil {
		m.t.Fatal(err)
	}
	out := map[string]*gomcp.Tool{}
	for _, tool := range lt.Tools {
		out[tool.Name] = tool
	}
	return out
}

// checkpointResult is the part of checkpoint's and rollback's result the tests read.
type checkpointResult struct {
	ID       int      `json:"id"`
	Name     string   `json:"name"`
	Changed  []string `json:"changed"`
	Problems []string `json:"problems"`
}

// TestMCPCheckpointRollback: with --stage the connection lists checkpoint and
// rollback, honestly annotated; a rollback to a checkpoint's id undoes what the tools
// wrote since, and the log records both as the session's checkpoint and rollback.
func TestMCPCheckpointRollback(t *testing.T) {
	mcpCheckpointRollback(t, newWorld(t))
}

func mcpCheckpointRollback(t *testing.T, w *world) {
	m := w.startMCP("--stage")
	tools := m.toolsOf()
	cp, rb := tools["checkpoint"], tools["rollback"]
	switch {
	case cp == nil || rb == nil:
		t.Fatalf("a staged connection lists no checkpoint or rollback: %v", slices.Collect(mapKeys(tools)))
	case tools["gate"] != nil:
		t.Error("gate is listed for a contract with no gates")
	case rb.Annotations == nil || rb.Annotations.DestructiveHint == nil || !*rb.Annotations.DestructiveHint || rb.Annotations.ReadOnlyHint:
		t.Errorf("rollback's annotations are not destructive: %+v", rb.Annotations)
	case cp.Annotations == nil || cp.Annotations.ReadOnlyHint || cp.Annotations.DestructiveHint == nil || *cp.Annotations.DestructiveHint:
		t.Errorf("checkpoint's annotations: %+v", cp.Annotations)
	}
	id := m.sessionID()
	m.ok("write_file", map[string]any{"path": "a.txt", "content": "one\n"}, nil)
	var first checkpointResult
	m.ok("checkpoint", map[string]any{"name": "first"}, &first)
	if first.ID <= 0 || first.Name != "first" {
		t.Fatalf("checkpoint: %+v", first)
	}
	m.ok("write_file", map[string]any{"path": "a.txt", "content": "two\n"}, nil)
	m.ok("exec", map[string]any{"command": "echo new > b.txt"}, nil)
	var back checkpointResult
	m.ok("rollback", map[string]any{"to": strconv.Itoa(first.ID)}, &back)
	if back.ID != first.ID || !slices.Contains(back.Changed, "a.txt") || !slices.Contains(back.Changed, "b.txt") {
		t.Errorf("rollback: %+v", back)
	}
	var r execResult
	m.ok("exec", map[string]any{"command": "cat a.txt; test ! -e b.txt && echo gone"}, &r)
	if r.Stdout != "one\ngone\n" {
		t.Errorf("after the rollback the sandbox sees %q", r.Stdout)
	}
	m.refused("rollback", map[string]any{"to": "never-taken"})
	m.refused("rollback", map[string]any{"to": ""}, "empty")
	m.refused("checkpoint", map[string]any{"name": strings.Repeat("n", 200)}, "longer than")
	assertAbsent(t, filepath.Join(w.ws, "a.txt"))
	m.close()
	w.assertSessionEnded(id)
	var cps, rbs int
	for _, rec := range sessionEvents(t, w, id) {
		switch string(rec.Type) {
		case "session.checkpoint":
			if strings.Contains(string(rec.Body), `"name":"first"`) {
				cps++
			}
		case "session.rollback":
			rbs++
		}
	}
	if cps != 1 || rbs != 1 {
		t.Errorf("the log holds %d checkpoint(s) named first and %d rollback(s); want 1 and 1", cps, rbs)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestMCPNoStageNoCheckpoint: without --stage, and with --gates deny, neither the
// staged tools nor gate is listed, even for a contract with gates.
func TestMCPNoStageNoCheckpoint(t *testing.T) {
	g := newGateWorld(t)
	m := g.startMCP("--gates", "deny")
	tools := m.toolsOf()
	for _, name := range []string{"checkpoint", "rollback", "gate"} {
		if tools[name] != nil {
			t.Errorf("%s is listed on a session that cannot serve it", name)
		}
	}
}

// TestMCPGate: the gate tool lists the contract's gates a person may approve (not
// one whose approve is deny), waits for the person's answer as cordon gate does,
// returns the operation's output or the refusal's reason, and a cancelled call
// withdraws its request instead of hanging.
func TestMCPGate(t *testing.T) {
	mcpGate(t, newGateWorld(t))
}

func mcpGate(t *testing.T, g *gateWorld) {
	m := g.startMCP("--gates", "ask")
	tool := m.toolsOf()["gate"]
	if tool == nil {
		t.Fatal("gate is not listed for a contract with gates")
	}
	schema, _ := json.Marshal(tool.InputSchema)
	if !strings.Contains(string(schema), `"enum":["push"]`) || tool.Annotations == nil || tool.Annotations.DestructiveHint == nil || !*tool.Annotations.DestructiveHint {
		t.Errorf("gate: schema %s, annotations %+v; want the enum [push] and destructive", schema, tool.Annotations)
	}
	id := m.sessionID()

	// Approved: the push runs outside, its output comes back.
	call, p := mcpAskGate(t, g, m, id)
	if r := g.cordon("", "gate", "approve", p.ID); r.code != 0 {
		t.Fatalf("gate approve: %v", r)
	}
	res := call.wait(t)
	out, data := gateResult(res)
	if res.IsError || !out.Approved || out.ExitCode != 0 {
		t.Errorf("approved gate: %s %s", data, resultText(res))
	}
	if refs := g.refs(); !strings.Contains(refs, "refs/heads/agent/"+id) {
		t.Errorf("the approved push did not land: %q", refs)
	}

	// Denied: a tool error with the person's reason.
	call, p = mcpAskGate(t, g, m, id)
	if r := g.cordon("", "gate", "deny", p.ID, "--why", "not on a Friday"); r.code != 0 {
		t.Fatalf("gate deny: %v", r)
	}
	if res := call.wait(t); !res.IsError || !strings.Contains(resultText(res), "not on a Friday") {
		t.Errorf("denied gate: want a tool error with the reason: %s", resultText(res))
	}

	// Cancelled: the call ends, and the request is withdrawn.
	call, _ = mcpAskGate(t, g, m, id)
	call.cancel()
	call.wait(t)
	for deadline := time.Now().Add(30 * time.Second); len(g.pending(id)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a cancelled gate call left its request pending")
		}
	}
	// A gate the contract has but a person may not approve is refused by the schema.
	if res, err := m.cs.CallTool(context.Background(), &gomcp.CallToolParams{Name: "gate", Arguments: map[string]any{"name": "release"}}); err == nil && !res.IsError {
		t.Errorf("gate release (approve: deny) was served: %s", resultText(res))
	}
	m.close()
	g.assertSessionEnded(id)
	var asked int
	for _, rec := range sessionEvents(t, g.world, id) {
		if string(rec.Type) == "cmd.start" && strings.Contains(string(rec.Body), wire.RequestArg) {
			asked++
		}
	}
	recs := sessionEvents(t, g.world, id)
	if got := gateTypes(recs); asked != 3 || !slices.Contains(got, "gate.approve") || !slices.Contains(got, "gate.deny") {
		t.Errorf("the log holds %d gate-request command(s) (want 3) and the gate events %v", asked, got)
	}
}

// gateCall is a gate tool call running in the background.
type gateCall struct {
	cancel context.CancelFunc
	done   chan *gomcp.CallToolResult
	errc   chan error
}

func (c *gateCall) wait(t *testing.T) *gomcp.CallToolResult {
	t.Helper()
	select {
	case res := <-c.done:
		return res
	case err := <-c.errc:
		return &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: err.Error()}}}
	case <-time.After(time.Minute):
		t.Fatal("the gate call did not end within a minute of its answer")
		return nil
	}
}

// mcpAskGate calls gate push in the background and waits for its request to show.
func mcpAskGate(t *testing.T, g *gateWorld, m *mcpConn, id string) (*gateCall, wire.Pending) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := &gateCall{cancel: cancel, done: make(chan *gomcp.CallToolResult, 1), errc: make(chan error, 1)}
	t.Cleanup(cancel)
	go func() {
		res, err := m.cs.CallTool(ctx, &gomcp.CallToolParams{Name: "gate", Arguments: map[string]any{"name": "push"}})
		if err != nil {
			c.errc <- err
			return
		}
		c.done <- res
	}()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ps := g.pending(id); len(ps) == 1 {
			return c, ps[0]
		}
	}
	t.Fatal("the gate call's request never showed in cordon gate ls")
	return nil, wire.Pending{}
}

// TestMCPGateHelperTraced (rt8's finding): another command of the session tries to
// trace the gate tool's helper (`cordon internal gate-request push`, in the sandbox)
// and make it exit 0 at its next system call, before any person decided. Each
// command is a Landlock domain of its own, which may trace only its own: the trace is
// refused. Where it is not (a kernel without Landlock), the tool's result is the host
// gate service's account of the call's requests, not the helper's exit status: no
// approval, and no push. On every backend.
func TestMCPGateHelperTraced(t *testing.T) {
	testutil.Require(t, runtime.GOARCH == "amd64", "the attack program's tracer needs amd64's registers")
	t.Run("bwrap", func(t *testing.T) { mcpGateHelperTraced(t, newGateWorld(t)) })
	forEachContainerBackend(t, func(t *testing.T, _ string) { mcpGateHelperTraced(t, newGateWorld(t)) })
}

func mcpGateHelperTraced(t *testing.T, g *gateWorld) {
	g.attacker()
	m := g.startMCP("--gates", "ask")
	id := m.sessionID()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gated := make(chan *gomcp.CallToolResult, 1)
	go func() {
		res, err := m.cs.CallTool(ctx, &gomcp.CallToolParams{Name: "gate", Arguments: map[string]any{"name": "push"}})
		if err != nil {
			res = &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: err.Error()}}}
		}
		gated <- res
	}()
	// The helper waits for a person: the tracer finds it whichever starts first.
	var r execResult
	m.ok("exec", map[string]any{"command": "./attack gate-lie"}, &r)
	if !strings.Contains(r.Stdout, "gate-lie ok") {
		if !strings.Contains(r.Stdout, "gate-lie denied") {
			t.Fatalf("the tracer neither traced the helper nor was refused: %s", r.Stdout)
		}
		// Refused: the request is the helper's, waiting for a person (filed once the
		// helper, found started, has asked).
		waitFor(t, 30*time.Second, "the helper's request pending after the refused trace", func() bool { return len(g.pending(id)) == 1 })
		cancel()
		<-gated
		return
	}
	res := <-gated
	out, data := gateResult(res)
	t.Logf("traced helper: %s", data)
	if !res.IsError || out.Approved || out.ExitCode == 0 {
		t.Errorf("the gate call whose helper was made to exit 0 answered %s; want a tool error, not approved", data)
	}
	if refs := g.refs(); strings.Contains(refs, "refs/heads/agent/") {
		t.Errorf("a push landed with no person's approval: %q", refs)
	}
}

// gateOutcome is the part of the gate tool's structured result the tests read.
type gateOutcome struct {
	Approved bool   `json:"approved"`
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message"`
}

// gateResult decodes res, a gate tool's result, and returns it with its JSON.
func gateResult(res *gomcp.CallToolResult) (gateOutcome, []byte) {
	var out gateOutcome
	data, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(data, &out)
	return out, data
}

// TestMCPStagedContainers runs the checkpoint, rollback and gate tests on docker and
// containerd.
func TestMCPStagedContainers(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) {
		t.Run("checkpoint", func(t *testing.T) { mcpCheckpointRollback(t, newWorld(t)) })
		t.Run("gate", func(t *testing.T) { mcpGate(t, newGateWorld(t)) })
	})
}
