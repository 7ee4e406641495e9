// Command agent is an example agent loop: a model (Anthropic's Messages API or any
// Chat Completions API) with one tool, exec, that runs in a cordon session, and a
// history kept in the window by package harness.
//
//	go run ./examples/agent -provider anthropic -model claude-sonnet-4-5 "make the tests pass"
//	go run ./examples/agent -provider openai -base-url http://localhost:8080/v1 -model qwen3 "..."
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/harness"
	"github.com/cordonhq/cordon/session"
)

type options struct {
	provider, baseURL, model, contract, cordon string
	window, maxTurns                           int
	maxTokens                                  int64
	task                                       string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.StringVar(&o.provider, "provider", "anthropic", "anthropic or openai (any Chat Completions API)")
	fs.StringVar(&o.baseURL, "base-url", "", "the API's base URL ($ANTHROPIC_BASE_URL, $OPENAI_BASE_URL)")
	fs.StringVar(&o.model, "model", os.Getenv("AGENT_MODEL"), "the model ($AGENT_MODEL)")
	fs.StringVar(&o.contract, "c", "", "the cordon contract (default: ./cordon.yaml, else the built-in one)")
	fs.StringVar(&o.cordon, "cordon", "cordon", "the cordon binary")
	fs.IntVar(&o.window, "window", 200000, "the model's context window in tokens")
	fs.IntVar(&o.maxTurns, "max-turns", 50, "turns before giving up")
	fs.Int64Var(&o.maxTokens, "max-tokens", 4096, "output tokens per answer")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.task = strings.Join(fs.Args(), " ")
	switch {
	case o.task == "":
		return o, errors.New("usage: agent [flags] TASK")
	case o.model == "":
		return o, errors.New("-model is required")
	}
	return o, nil
}

// newModel returns the model and, on the same client, the summarizer for compaction.
func newModel(o options) (model, harness.Summarizer, error) {
	cfg := harness.ModelConfig{Model: o.model, BaseURL: o.baseURL}
	switch o.provider {
	case "anthropic":
		s, err := harness.NewAnthropic(cfg)
		if err != nil {
			return nil, nil, err
		}
		return anthropicModel{s.Client(), o.model, o.maxTokens}, s, nil
	case "openai":
		s, err := harness.NewOpenAI(cfg)
		if err != nil {
			return nil, nil, err
		}
		return openaiModel{s.Client(), o.model, o.maxTokens}, s, nil
	}
	return nil, nil, fmt.Errorf("unknown provider %q", o.provider)
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	m, sum, err := newModel(o)
	if err != nil {
		return err
	}
	s, err := session.Start(ctx, session.StartOptions{Cordon: o.cordon, Contract: o.contract})
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "agent: stopping the session:", err)
		}
	}()
	fmt.Fprintf(out, "session %s\n", s.ID())
	h, err := harness.New(harness.Config{Window: o.window, Summarizer: sum},
		"You are a coding agent. Use the exec tool to inspect and change the project; answer without a tool call when done.")
	if err != nil {
		return err
	}
	h.User(o.task)
	return loop(ctx, o, m, s, h, out)
}

// loop runs turns until the model answers without a tool call.
func loop(ctx context.Context, o options, m model, s *session.Session, h *harness.History, out io.Writer) error {
	for range o.maxTurns {
		req, err := h.Request(ctx, harness.Facts{Time: time.Now(), Branch: gitBranch()})
		if err != nil {
			return err
		}
		text, calls, usage, err := m.next(ctx, req)
		if err != nil {
			return fmt.Errorf("turn %d: %w", h.Turn(), err)
		}
		if err := h.Assistant(text, calls, usage); err != nil {
			return err
		}
		if text != "" {
			fmt.Fprintln(out, text)
		}
		if len(calls) == 0 {
			t, err := s.Sweep(ctx)
			if err == nil && len(t.Changed) > 0 {
				fmt.Fprintf(out, "changed: %s\n", strings.Join(t.Changed, " "))
			}
			if err == nil && t.More > 0 {
				fmt.Fprintf(out, "changed: truncated: %d more not listed\n", t.More)
			}
			return err
		}
		for _, c := range calls {
			if err := h.Result(runCall(ctx, s, c, out)); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("no answer after %d turns", o.maxTurns)
}

// runCall runs one exec call in the session; whatever happens, the model gets a result.
func runCall(ctx context.Context, s *session.Session, c harness.Call, out io.Writer) harness.Result {
	r := harness.Result{CallID: c.ID, Name: c.Name}
	var in struct {
		Command string `json:"command"`
	}
	if c.Name != "exec" || json.Unmarshal(c.Input, &in) != nil || in.Command == "" {
		r.Content, r.IsError = fmt.Sprintf("unknown tool %q or bad input %s; the one tool is exec {command}", c.Name, c.Input), true
		return r
	}
	fmt.Fprintf(out, "$ %s\n", in.Command)
	res, err := s.Exec(ctx, []string{"sh", "-c", in.Command}, session.ExecOptions{Cap: 4000, Timeout: 2 * time.Minute})
	if err != nil {
		r.Content, r.IsError = "cordon could not run it: "+err.Error(), true
		return r
	}
	r.Content = fmt.Sprintf("exit code %d\n%s", res.ExitCode, res.Stdout)
	if res.Stderr != "" {
		r.Content += "\nstderr:\n" + res.Stderr
	}
	if res.Reason != "" {
		r.Content += "\ncordon: " + res.Reason
	}
	r.Spill, r.IsError = res.SpillPath, res.ExitCode != 0
	fmt.Fprint(out, res.Stdout)
	return r
}

// gitBranch is the current git branch, "" outside a repository.
func gitBranch() string {
	b, err := exec.Command("git", "rev-parse", "--abbrev-ref", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
