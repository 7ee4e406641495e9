package harness

import (
	"fmt"
	"strings"
	"time"
)

// Facts are the volatile facts of a turn. They go at the end of the request (its last
// message) and never into the history, so the request's prefix stays byte-identical
// from turn to turn. The caller gathers them: the time from its clock, the branch
// from git, the todos from its planner, Changed from the cordon session's sweep
// (session.Turn.Changed). Zero fields are left out.
type Facts struct {
	Time    time.Time
	Branch  string
	Todos   []string // open todos
	Changed []string // workspace paths changed this turn
	// ChangedMore counts the changes the sweep did not list (session.Turn.More).
	ChangedMore int
}

// At most this many changed paths and todos are listed; the rest are counted.
const maxListed = 50

// Render returns the facts as a short block for the end of a request, "" when there
// are none.
func (f Facts) Render() string {
	var b strings.Builder
	if !f.Time.IsZero() {
		fmt.Fprintf(&b, "time: %s\n", f.Time.Format(time.RFC3339))
	}
	if f.Branch != "" {
		fmt.Fprintf(&b, "git branch: %s\n", oneLine(f.Branch))
	}
	list(&b, "open todos", f.Todos, 0)
	list(&b, "files changed this turn", f.Changed, f.ChangedMore)
	if b.Len() == 0 {
		return ""
	}
	return "<context>\n" + b.String() + "</context>"
}

// list writes title and items, at most maxListed of them; the rest, and more not in
// items, are counted.
func list(b *strings.Builder, title string, items []string, more int) {
	if len(items) == 0 && more == 0 {
		return
	}
	fmt.Fprintf(b, "%s:\n", title)
	for _, it := range items[:min(len(items), maxListed)] {
		fmt.Fprintf(b, "- %s\n", oneLine(it))
	}
	if n := max(len(items)-maxListed, 0) + more; n > 0 {
		fmt.Fprintf(b, "- … and %d more\n", n)
	}
}

// oneLine keeps a fact on its line: a path or todo with a newline could otherwise
// write lines that look like other facts.
func oneLine(s string) string { return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s) }
