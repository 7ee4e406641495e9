package cli

import (
	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/session/wire"
)

// Dynamic shell completion (cordon completion bash|zsh|fish installs cobra's script,
// which asks `cordon __complete ...`).

// completeSessions completes a SESSION: the ids of the live sessions.
func completeSessions(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveDefault // the command: files
	}
	var ids []cobra.Completion
	for _, s := range wire.List(paths.RunRoot().Sessions()) {
		if s.Alive() {
			ids = append(ids, cobra.CompletionWithDesc(s.ID, s.Workspace))
		}
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

// completeRuns completes a RUN: last, then the run ids of the audit root, newest first.
func completeRuns(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := []cobra.Completion{cobra.CompletionWithDesc("last", "the newest run of this workspace")}
	dir, _ := c.Flags().GetString("audit-dir")
	if root, err := auditRoot(dir); err == nil {
		if runs, err := audit.List(root); err == nil {
			for _, r := range runs {
				out = append(out, cobra.CompletionWithDesc(r.ID, r.Workspace))
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// flagCompletions are the fixed values of flags, by flag name (a slice, so that
// nothing is built when cordon starts).
var flagCompletions = []struct {
	name   string
	values []cobra.Completion
}{
	{"backend", []cobra.Completion{"auto", "bwrap", "docker", "containerd", "kubernetes", "seatbelt"}},
	{"gates", []cobra.Completion{"ask", "deny"}},
	{"format", []cobra.Completion{"jsonl", "ocsf"}},
}

// registerFlagCompletions registers flagCompletions on every command of c's tree that
// has such a flag, and -h/--help on exec, which parses its own flags; only
// `cordon __complete` needs them.
func registerFlagCompletions(c *cobra.Command) {
	if c.DisableFlagParsing {
		c.InitDefaultHelpFlag() // cobra's completion adds it only where cobra parses (exec)
	}
	for _, fc := range flagCompletions {
		if c.LocalFlags().Lookup(fc.name) != nil {
			_ = c.RegisterFlagCompletionFunc(fc.name, cobra.FixedCompletions(fc.values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	for _, s := range c.Commands() {
		registerFlagCompletions(s)
	}
}
