package gate

import (
	"fmt"
	"strings"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/termtext"
)

// maxPreview bounds the preview text: room for a push's every commit
// (MaxPushCommits lines) and the rest, and for MaxPending previews in one reply of
// `cordon gate ls` (wire.MaxLine).
const maxPreview = 192 << 10

// preview describes what the operation would do, for the approver: the argv, where it
// runs, the credential's name and, for a push, where it goes, the object ids pinned,
// every commit it would publish and the history of what is pushed (writePush). No git
// runs in the workspace for it: the uncommitted changes are in the run's log.
func preview(workspace string, argv []string, g contract.Gate, p *push) string {
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
	s := sanitize(b.String())
	if len(s) > maxPreview {
		s = s[:maxPreview] + "\n[preview truncated]\n"
	}
	return s
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

// sanitize escapes what could drive the approver's terminal or show other than it is
// (termtext), keeping newlines: commit subjects and file names are the agent's.
func sanitize(s string) string { return termtext.Text(s) }
