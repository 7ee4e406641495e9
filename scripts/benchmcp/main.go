// Command benchmcp measures issue 38's round trip side by side in one run: an MCP
// `exec` tool call of `true` on a connected `cordon mcp` (the agent's shell over
// stdio), a warm `cordon exec SID -- true` and `cordon-exec SID -- true` into a session
// of the same backend, and a bare `bwrap … true` start. It prints the median and p90
// of each, and each median's ratio to bare bwrap's.
//
// Usage: benchmcp -bin DIR -warm DIR [-n 50] (run in a scratch workspace, the MCP
// session's; -warm is another, beside it, for the warm session: a workspace another
// session holds is refused; bwrap backend)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	bin := flag.String("bin", "bin", "the directory of the cordon binaries")
	n := flag.Int("n", 50, "samples of each")
	warm := flag.String("warm", "", "the warm session's workspace (not the current directory, nor inside it)")
	flag.Parse()
	if *warm == "" {
		fmt.Fprintln(os.Stderr, "benchmcp: -warm DIR is required")
		os.Exit(2)
	}
	if err := run(*bin, *warm, *n); err != nil {
		fmt.Fprintln(os.Stderr, "benchmcp:", err)
		os.Exit(1)
	}
}

type row struct {
	name string
	ms   []float64
}

func run(bin, warm string, n int) error {
	cordon := filepath.Join(bin, "cordon")
	ctx := context.Background()

	cmd := exec.Command(cordon, "mcp", "--backend", "bwrap")
	cmd.Stderr = os.Stderr
	client := gomcp.NewClient(&gomcp.Implementation{Name: "benchmcp", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	cs, err := client.Connect(cctx, &gomcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("connecting to cordon mcp: %w", err)
	}
	defer cs.Close()
	mcpCall := func() error {
		res, err := cs.CallTool(ctx, &gomcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "true"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("exec: a tool error")
		}
		return err
	}

	start := exec.Command(cordon, "session", "start", "--backend", "bwrap")
	start.Dir, start.Stderr = warm, os.Stderr
	out, err := start.Output()
	if err != nil {
		return fmt.Errorf("session start: %w", err)
	}
	sid := strings.TrimSpace(string(out))
	defer exec.Command(cordon, "session", "stop", sid).Run()

	bwrap := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent",
		"--new-session", "--cap-drop", "ALL", "/bin/true"}
	rows := []struct {
		name string
		do   func() error
	}{
		{"MCP exec (cordon mcp, connected)", mcpCall},
		{"cordon exec (warm session)", func() error { return exec.Command(cordon, "exec", sid, "--", "true").Run() }},
		{"cordon-exec (warm session)", func() error { return exec.Command(filepath.Join(bin, "cordon-exec"), sid, "--", "true").Run() }},
		{"bwrap", func() error { return exec.Command("bwrap", bwrap...).Run() }},
	}
	results := make([]row, len(rows))
	for i := range results {
		results[i].name = rows[i].name
	}
	// Interleaved, one of each per round, so load hits them alike; 3 warm-up rounds.
	for round := -3; round < n; round++ {
		for i, r := range rows {
			t0 := time.Now()
			if err := r.do(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if round >= 0 {
				results[i].ms = append(results[i].ms, float64(time.Since(t0).Microseconds())/1000)
			}
		}
	}
	base := quantile(results[len(results)-1].ms, 0.5)
	fmt.Printf("%-36s %10s %10s %10s\n", "", "median ms", "p90 ms", "vs bwrap")
	for _, r := range results {
		med := quantile(r.ms, 0.5)
		fmt.Printf("%-36s %10.2f %10.2f %9.2fx\n", r.name, med, quantile(r.ms, 0.9), med/base)
	}
	fmt.Printf("(%d rounds, interleaved)\n", n)
	return nil
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
