package mcp

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Staged is the part of a staged [session.Session] the checkpoint and rollback tools
// use.
type Staged interface {
	Checkpoint(ctx context.Context, name string) (wire.Checkpoint, []string, error)
	Rollback(ctx context.Context, to string) (wire.Checkpoint, []string, []string, error)
}

// Gate is one of the contract's gates an agent may ask for.
type Gate struct {
	Name string
	Why  string // the contract's why, shown to the agent
}

// maxCheckpointName bounds checkpoint's name and rollback's to; the session refuses
// the names it does not take with the reason.
const maxCheckpointName = 128

// CheckpointInput is checkpoint's arguments.
type CheckpointInput struct {
	Name string `json:"name,omitempty" jsonschema:"a name for the checkpoint (default: none; it is numbered either way)"`
}

// RollbackInput is rollback's arguments.
type RollbackInput struct {
	To string `json:"to" jsonschema:"the checkpoint: its id (a number), its name, or -K for the K-th latest automatic one (one is taken before each command)"`
}

// CheckpointOutput is checkpoint's and rollback's result.
type CheckpointOutput struct {
	ID     int    `json:"id" jsonschema:"the checkpoint's id: rollback takes it"`
	Name   string `json:"name,omitempty" jsonschema:"its name, when it has one"`
	Auto   bool   `json:"auto" jsonschema:"taken automatically before a command"`
	Copied int    `json:"copied" jsonschema:"staged files it copied"`
	Linked int    `json:"linked" jsonschema:"staged files it shares with the previous checkpoint"`
	// Changed is what a rollback changed.
	Changed []string `json:"changed,omitempty" jsonschema:"rollback: the workspace paths it changed"`
	// Problems are what a checkpoint does not hold or a rollback did not restore.
	Problems []string `json:"problems" jsonschema:"what it does not hold (checkpoint) or did not restore (rollback), path: why"`
}

// GateInput is gate's arguments.
type GateInput struct {
	Name string `json:"name" jsonschema:"the contract's gate to ask for"`
}

// GateOutput is gate's result.
type GateOutput struct {
	Gate     string `json:"gate"`
	Approved bool   `json:"approved" jsonschema:"a person approved it and its operation exited 0"`
	ExitCode int    `json:"exit_code" jsonschema:"the operation's exit status; 1 when refused, 125 when the sandbox has no gates"`
	Output   string `json:"output" jsonschema:"the operation's output"`
	Message  string `json:"message" jsonschema:"what cordon said: whom it waited for, who refused and why"`
	Cmd      string `json:"cmd" jsonschema:"the seq of the request's cmd.start in the session's audit log"`
}

func (t *tools) addStaged(s *gomcp.Server, st Staged) {
	t.staged = st
	gomcp.AddTool(s, &gomcp.Tool{
		Name:  "checkpoint",
		Title: "Checkpoint the workspace",
		Description: "Keeps the workspace as it is now (this session is staged: its writes wait in an overlay) and returns the checkpoint's id, " +
			"which rollback takes. Checkpoints last until the session ends; one is also taken automatically before each command.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	}, t.checkpoint)
	gomcp.AddTool(s, &gomcp.Tool{
		Name:  "rollback",
		Title: "Roll the workspace back",
		Description: "Makes the workspace what it was at a checkpoint (its id, its name, or -K for the K-th latest automatic one): " +
			"every change since is undone, including files written since. Returns the paths it changed.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.rollback)
}

func (t *tools) checkpoint(ctx context.Context, _ *gomcp.CallToolRequest, in CheckpointInput) (*gomcp.CallToolResult, CheckpointOutput, error) {
	if err := checkName("name", in.Name); err != nil {
		return nil, CheckpointOutput{}, err
	}
	cp, problems, err := t.staged.Checkpoint(ctx, in.Name)
	if err != nil {
		return nil, CheckpointOutput{}, problem(err)
	}
	out := checkpointOut(cp, nil, problems)
	return text(false, "checkpoint %d%s taken (%d file(s) copied, %d shared)%s", out.ID, named(out.Name), out.Copied, out.Linked, problemList(out.Problems)), out, nil
}

func (t *tools) rollback(ctx context.Context, _ *gomcp.CallToolRequest, in RollbackInput) (*gomcp.CallToolResult, CheckpointOutput, error) {
	if in.To == "" {
		return nil, CheckpointOutput{}, fmt.Errorf("to is empty: give a checkpoint's id, its name or -K")
	}
	if err := checkName("to", in.To); err != nil {
		return nil, CheckpointOutput{}, err
	}
	cp, changed, problems, err := t.staged.Rollback(ctx, in.To)
	if err != nil {
		if len(problems) > 0 {
			return nil, CheckpointOutput{}, fmt.Errorf("%w%s", problem(err), problemList(problems))
		}
		return nil, CheckpointOutput{}, problem(err)
	}
	out := checkpointOut(cp, changed, problems)
	summary := fmt.Sprintf("rolled back to checkpoint %d%s; %d path(s) changed", out.ID, named(out.Name), len(out.Changed))
	if len(out.Changed) > 0 {
		summary += ":\n" + lines(out.Changed)
	}
	return text(len(out.Problems) > 0, "%s%s", summary, problemList(out.Problems)), out, nil
}

func checkpointOut(cp wire.Checkpoint, changed, problems []string) CheckpointOutput {
	out := CheckpointOutput{ID: cp.N, Name: cp.Name, Auto: cp.Auto, Copied: cp.Copied, Linked: cp.Linked, Changed: changed, Problems: problems}
	if out.Problems == nil {
		out.Problems = []string{}
	}
	return out
}

func checkName(field, v string) error {
	switch {
	case len(v) > maxCheckpointName:
		return fmt.Errorf("%s is longer than %d bytes", field, maxCheckpointName)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%s holds a control character", field)
	}
	return nil
}

func named(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", name)
}

func problemList(ps []string) string {
	if len(ps) == 0 {
		return ""
	}
	return "\nnot restored or not kept:\n" + lines(ps)
}

func (t *tools) addGate(s *gomcp.Server, gates []Gate) error {
	in, err := jsonschema.For[GateInput](nil)
	if err != nil {
		return err
	}
	var names []any
	var list strings.Builder
	for _, g := range gates {
		names = append(names, g.Name)
		fmt.Fprintf(&list, "\n- %s", g.Name)
		if g.Why != "" {
			fmt.Fprintf(&list, ": %s", g.Why)
		}
	}
	in.Properties["name"].Enum = names
	gomcp.AddTool(s, &gomcp.Tool{
		Name:  "gate",
		Title: "Ask a person to run a gated operation",
		Description: "Asks a person to approve one of the contract's gates: an operation that runs outside the sandbox once approved " +
			"(a push, a deploy), with credentials the sandbox never holds. Waits for the answer; returns the operation's output, " +
			"or who refused it and why. The gates:" + list.String(),
		InputSchema: in,
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, t.gate)
	return nil
}

// gate runs `cordon internal gate-request NAME` in the sandbox, which is `cordon gate
// NAME` there: the request is a command in the log, waits as long as the contract's
// commands.timeout lets a command run, and is withdrawn when the call is cancelled
// (the command ends with the call's connection). The result is the host gate
// service's account of the request, which the command's result carries (Gates): what
// the helper prints is the sandbox's word, which another command of the session can
// trace and change.
func (t *tools) gate(ctx context.Context, _ *gomcp.CallToolRequest, in GateInput) (*gomcp.CallToolResult, GateOutput, error) {
	if !slices.ContainsFunc(t.o.Gates, func(g Gate) bool { return g.Name == in.Name }) {
		return nil, GateOutput{}, fmt.Errorf("the contract has no gate %q that a person may approve", in.Name)
	}
	res, err := t.sess.Exec(ctx, []string{t.o.Helper, "internal", gatewire.RequestArg, in.Name}, session.ExecOptions{Cap: DefaultOutputChars})
	if err != nil {
		return nil, GateOutput{}, problem(err)
	}
	out := gateOutput(in.Name, res)
	var b strings.Builder
	if out.Approved {
		fmt.Fprintf(&b, "gate %s: approved; the operation exited 0\n", in.Name)
	} else {
		fmt.Fprintf(&b, "gate %s: not done (exit %d)\n", in.Name, out.ExitCode)
	}
	if out.Message != "" {
		fmt.Fprintf(&b, "%s\n", out.Message)
	}
	if out.Output != "" {
		fmt.Fprintf(&b, "output:\n%s", out.Output)
	}
	return text(!out.Approved, "%s", b.String()), out, nil
}

// gateOutput is the gate tool's result for the helper's command res, from the host's
// account of its requests (res.Gates): approved only when the host decided exactly one
// request, for gate, approved, and its operation exited 0. Anything else (no request
// reached the host, several did, another gate's) is not an approval, whatever the
// helper printed or exited with.
func gateOutput(gate string, res *wire.Result) GateOutput {
	out := GateOutput{Gate: gate, ExitCode: 1, Cmd: res.Cmd}
	var msg []string
	switch n := len(res.Gates) + res.GatesMore; {
	case n == 0:
		out.ExitCode = cmp.Or(res.ExitCode, 1)
		msg = append(msg, fmt.Sprintf("the host's gate service had no request from this call (its helper exited %d)", res.ExitCode))
		if say := strings.TrimSpace(res.Stderr); say != "" {
			msg = append(msg, "the helper said: "+say)
		}
	case n > 1 || res.Gates[0].Gate != gate:
		msg = append(msg, fmt.Sprintf("the host's gate service had %d request(s) from this call, where it makes one for gate %s: not taken for an answer (the log has each)", n, gate))
	default:
		d := res.Gates[0]
		switch o := d.Outcome; {
		case o == nil:
			msg = append(msg, fmt.Sprintf("request %s: %s", cmp.Or(d.Request, "(not filed)"), d.Error))
		case !o.Approved:
			msg = append(msg, fmt.Sprintf("request %s: denied by %s: %s", cmp.Or(d.Request, "(not filed)"), o.By, o.Why))
		default:
			out.ExitCode, out.Output = o.ExitCode, o.Output
			out.Approved = o.ExitCode == 0
			msg = append(msg, fmt.Sprintf("request %s: approved by %s", d.Request, o.By))
			if d.OutputCut {
				msg = append(msg, fmt.Sprintf("the operation's output is cut at its first %d bytes", len(o.Output)))
			}
		}
	}
	if res.TimedOut {
		msg = append(msg, "no answer before the contract's commands.timeout; the request was withdrawn")
	}
	out.Message = strings.Join(msg, "\n")
	return out
}
