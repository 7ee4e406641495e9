package gate

import (
	"fmt"
	"strings"

	"github.com/cordonhq/cordon/contract"
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

// sanitize replaces control characters other than newline and tab, and the
// characters that reorder or hide text (bidirectional overrides and isolates,
// zero-width ones), so that commit subjects and file names the agent chose can neither
// drive the approver's terminal nor show other than what they are.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || invisible(r) {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// invisible reports whether r reorders or hides the text around it.
func invisible(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0xfeff, r == 0x061c:
		return true
	}
	return false
}
