package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Bounds of exec's arguments.
const (
	// DefaultOutputChars is exec's output cap per stream when the call gives none:
	// what `cordon exec --json` keeps, sized for a model's context window.
	DefaultOutputChars = 10000
	// MaxOutputChars is the largest cap a call may ask for.
	MaxOutputChars = 200000
	// MaxCommand bounds the command line and MaxStdin the stdin a call sends.
	MaxCommand = 128 << 10
	MaxStdin   = 8 << 20
	// MaxTimeout bounds timeout_seconds.
	MaxTimeout = 24 * time.Hour
)

// ExecSchema is the schema of exec's structured result, `cordon exec --json`'s.
const ExecSchema = "cordon.exec/v1"

// ExecInput is exec's arguments.
type ExecInput struct {
	Command        string `json:"command" jsonschema:"the command line, run by /bin/sh -c inside the sandbox (pipes, redirections and && work)"`
	Stdin          string `json:"stdin,omitempty" jsonschema:"text the command reads on its standard input (default: empty)"`
	Dir            string `json:"dir,omitempty" jsonschema:"absolute working directory inside the sandbox (default: the contract's workdir, the workspace); for one below the workspace, start the command with cd"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"end the command after this many seconds (default and at most: the contract's commands.timeout)"`
	MaxOutputChars int    `json:"max_output_chars,omitempty" jsonschema:"keep at most this many characters of each of stdout and stderr (default 10000, at most 200000); the whole output goes to a spill file inside the sandbox, named by spill_path"`
}

// ExecOutput is exec's structured result: the fields of `cordon exec --json`.
type ExecOutput struct {
	Schema string `json:"schema" jsonschema:"cordon.exec/v1"`
	wire.Result
}

func (t *tools) addExec(s *gomcp.Server) {
	gomcp.AddTool(s, &gomcp.Tool{
		Name:  "exec",
		Title: "Run a command in the sandbox",
		Description: "Runs a shell command line (/bin/sh -c) inside the cordon sandbox, in the workspace, under the contract: " +
			"it reads and writes only what the contract allows, reaches the network only through its egress rules, and is recorded in the audit log. " +
			"Returns the exit code, stdout and stderr cut at max_output_chars (the whole output is in the spill file named by spill_path, " +
			"readable with read_file until the next changes call), the files it changed (diffstat), the network destinations it was refused " +
			"with the contract rule that would allow each, and monitor alerts. A non-zero exit is reported as a tool error with the output.",
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, t.exec)
}

func (in ExecInput) check(maxTimeout time.Duration) error {
	switch {
	case strings.TrimSpace(in.Command) == "":
		return fmt.Errorf("command is empty")
	case len(in.Command) > MaxCommand:
		return fmt.Errorf("command is longer than %d bytes; write a script with write_file and run it", MaxCommand)
	case strings.IndexByte(in.Command, 0) >= 0:
		return fmt.Errorf("command holds a NUL byte, which no argument can")
	case len(in.Stdin) > MaxStdin:
		return fmt.Errorf("stdin is longer than %d bytes; write it to a file with write_file", MaxStdin)
	case in.TimeoutSeconds < 0 || in.TimeoutSeconds > int(maxTimeout/time.Second):
		return fmt.Errorf("timeout_seconds must be between 0 and %d", int(maxTimeout/time.Second))
	case in.MaxOutputChars < 0 || in.MaxOutputChars > MaxOutputChars:
		return fmt.Errorf("max_output_chars must be between 0 and %d", MaxOutputChars)
	}
	if in.Dir == "" {
		return nil
	}
	if !strings.HasPrefix(in.Dir, "/") {
		return fmt.Errorf("dir must be an absolute path inside the sandbox; for one below the workspace, start the command with cd")
	}
	return checkPath(in.Dir)
}

func (t *tools) exec(ctx context.Context, _ *gomcp.CallToolRequest, in ExecInput) (*gomcp.CallToolResult, ExecOutput, error) {
	if err := in.check(t.o.MaxTimeout); err != nil {
		return nil, ExecOutput{}, err
	}
	o := session.ExecOptions{Dir: in.Dir, Timeout: time.Duration(in.TimeoutSeconds) * time.Second, Cap: in.MaxOutputChars}
	if o.Cap == 0 {
		o.Cap = DefaultOutputChars
	}
	if in.Stdin != "" {
		o.Stdin = strings.NewReader(in.Stdin)
	}
	res, err := t.sess.Exec(ctx, []string{t.o.Shell, "-c", in.Command}, o)
	if err != nil {
		return nil, ExecOutput{}, problem(err)
	}
	out := ExecOutput{Schema: ExecSchema, Result: *res}
	fillNil(&out.Result)
	return text(res.ExitCode != 0 || res.TimedOut, "%s", execSummary(res)), out, nil
}

// fillNil makes r's nil lists empty, so the result says [] rather than null.
func fillNil(r *wire.Result) {
	if r.DeniedEgress == nil {
		r.DeniedEgress = []string{}
	}
	if r.Denied == nil {
		r.Denied = []wire.Denial{}
	}
	if r.Alerts == nil {
		r.Alerts = []wire.Alert{}
	}
	if r.Gates == nil {
		r.Gates = []gatewire.Decided{}
	}
}

// execSummary is exec's text result: the outcome line, then the (capped) output and
// what the contract refused, which is what a client that shows only text gives the
// model.
func execSummary(r *wire.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d in %dms", r.ExitCode, r.DurationMS)
	if r.TimedOut {
		b.WriteString(" (timed out)")
	}
	if r.Reason != "" && r.Reason != "exited" {
		fmt.Fprintf(&b, ": %s", r.Reason)
	}
	if d := r.Diffstat; d.Files > 0 {
		fmt.Fprintf(&b, "; %d file(s) changed, +%d -%d", d.Files, d.Insertions, d.Deletions)
	}
	b.WriteByte('\n')
	if r.Stdout != "" {
		fmt.Fprintf(&b, "stdout:\n%s", r.Stdout)
		if !strings.HasSuffix(r.Stdout, "\n") {
			b.WriteByte('\n')
		}
	}
	if r.Stderr != "" {
		fmt.Fprintf(&b, "stderr:\n%s", r.Stderr)
		if !strings.HasSuffix(r.Stderr, "\n") {
			b.WriteByte('\n')
		}
	}
	if r.Truncated {
		fmt.Fprintf(&b, "output cut; the whole of it: %s", r.SpillPath)
		if r.StderrSpillPath != "" {
			fmt.Fprintf(&b, " (stderr: %s)", r.StderrSpillPath)
		}
		b.WriteByte('\n')
	}
	// A destination, a target and what is said of them are the sandbox's words (a
	// name it asked the proxy for, a path it touched): shown, as paths are. Its
	// output is its own, given as it is.
	for _, d := range r.Denied {
		fmt.Fprintf(&b, "network: %s refused (%s)", shown(d.Destination), shown(d.Reason))
		if d.SuggestedRule != "" {
			fmt.Fprintf(&b, "; the contract rule that would allow it: %s", shown(d.SuggestedRule))
		}
		b.WriteByte('\n')
	}
	if r.DeniedMore > 0 {
		fmt.Fprintf(&b, "network: %d more refusal(s)\n", r.DeniedMore)
	}
	for _, a := range r.Alerts {
		fmt.Fprintf(&b, "monitor: %s: %s (%s, %d time(s))\n", a.Category, shown(a.Target), a.Syscall, a.Count)
	}
	return b.String()
}
