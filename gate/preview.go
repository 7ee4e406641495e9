package gate

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/cordonhq/cordon/contract"
)

// maxPreview bounds the preview text: room for a push's every commit
// (MaxPushCommits lines) and the rest, and for MaxPending previews in one reply of
// `cordon gate ls` (wire.MaxLine).
const maxPreview = 192 << 10

// preview describes what the operation would do, for the approver: the argv, where it
// runs, the credential's name, for a push where it goes, the object ids pinned and
// every commit it would publish (writePush), and for git in a repository what HEAD is,
// the recent history, the remotes and the uncommitted changes. Everything is computed with the
// hardened git environment: the repository was written by the agent.
func preview(ctx context.Context, workspace string, argv []string, g contract.Gate, p *push) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run:        %s\n", shellQuote(argv))
	fmt.Fprintf(&b, "in:         %s (on the host, outside the sandbox)\n", workspace)
	if g.Credential != nil {
		fmt.Fprintf(&b, "credential: %s (%s), minted for this operation and revoked after\n", g.Credential.Name, g.Credential.Provider)
	}
	fmt.Fprintf(&b, "timeout:    %s\n", g.Timeout)
	if p != nil {
		writePush(&b, p)
	}
	if isGit(argv) && workspace != "" {
		gitPreview(ctx, &b, workspace)
	}
	s := sanitize(b.String())
	if len(s) > maxPreview {
		s = s[:maxPreview] + "\n[preview truncated]\n"
	}
	return s
}

func gitPreview(ctx context.Context, b *strings.Builder, workspace string) {
	home, err := os.MkdirTemp("", "cordon-gate-")
	if err != nil {
		return
	}
	defer os.RemoveAll(home)
	env := hardenedEnv(home, workspace, nil)
	// A setting the overrides cannot neutralise (a filter, a textconv) would run during
	// the preview's own git commands: none runs then.
	if err := checkRepoConfig(ctx, workspace, home); err != nil {
		fmt.Fprintf(b, "\nWARNING: %v\n(git was not run for this preview; a git operation other than a push will be refused)\n", err)
		return
	}
	head, err := git(ctx, workspace, env, "log", "-1", "--format=%H %s")
	if err != nil {
		fmt.Fprintf(b, "\n(not a git repository with commits: %v)\n", firstLine(err.Error()))
		return
	}
	fmt.Fprintf(b, "HEAD:       %s\n", strings.TrimSpace(head))
	sections := []struct {
		title string
		args  []string
	}{
		{"remotes (git remote -v)", []string{"remote", "-v"}},
		{"history (git log --oneline -n 20)", []string{"log", "--oneline", "--no-decorate", "-n", "20"}},
		{"uncommitted (git status --short)", []string{"status", "--short", "--untracked-files=normal"}},
	}
	for _, sec := range sections {
		out, err := git(ctx, workspace, env, sec.args...)
		if err != nil {
			out = "(" + firstLine(err.Error()) + ")\n"
		}
		if strings.TrimSpace(out) == "" {
			out = "(none)\n"
		}
		fmt.Fprintf(b, "\n%s:\n%s", sec.title, indent(out))
	}
}

// shellQuote renders argv for people, quoting what a shell would split.
func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]{}!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ") + "\n"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// sanitize replaces control characters other than newline and tab, so that commit
// subjects and file names the agent chose cannot drive the approver's terminal.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}
