package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/session/wire"
)

// printDenied writes the line `cordon run` and `cordon exec` end with for one destination
// the egress proxy refused, e.g.
//
//	cordon: egress denied: example.com:443 (not in network.allow; to allow: network.allow: [{host: example.com, ports: [443]}])
//
// The destination is what the sandbox asked for: every byte that is not printable ASCII
// is shown as \xNN, so no name can forge a line or reach the terminal as a control code.
func printDenied(w io.Writer, dest, reason, rule string) {
	if rule != "" {
		reason += "; to allow: " + rule
	}
	fmt.Fprintf(w, "cordon: egress denied: %s (%s)\n", terminalSafe(dest), terminalSafe(reason))
}

// maxSummaryLines bounds the lines of each kind `cordon run` and `cordon exec` end with;
// the rest are counted in one line (the audit log has every one).
const maxSummaryLines = 20

// ending is what a command's end says on stderr: one line per denied destination and
// one per kind of monitor alert, at most maxSummaryLines of each.
type ending struct {
	denied []wire.Denial
	more   int // denied attempts past those the result lists
	alerts []wire.Alert
}

func (e ending) print(w io.Writer) {
	if len(e.denied)+len(e.alerts)+e.more == 0 {
		return
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			// A terminal, which the command shared: whatever state its last bytes left
			// (concealed, black on black) is reset, on a line of cordon's own.
			fmt.Fprint(w, "\033[0m\n")
		}
	}
	for i, d := range e.denied {
		if i == maxSummaryLines {
			fmt.Fprintf(w, "cordon: and %d more denied destinations (cordon audit show)\n", len(e.denied)-i)
			break
		}
		printDenied(w, d.Destination, d.Reason, d.SuggestedRule)
	}
	if e.more > 0 {
		fmt.Fprintf(w, "cordon: and %d more denied connection attempts (cordon audit show)\n", e.more)
	}
	for i, a := range e.alerts {
		if i == maxSummaryLines {
			fmt.Fprintf(w, "cordon: and %d more kinds of monitor alert (cordon audit show)\n", len(e.alerts)-i)
			break
		}
		printAlert(w, a)
	}
}

// printAlert writes the line for one kind of monitor alert, e.g.
//
//	cordon: monitor alert: write to a read-only path: /usr/bin/x (openat, 2 times)
//
// Only the category, what the command touched and the syscall are shown: the contract's
// path and why are in the log. Every byte outside printable ASCII is escaped.
func printAlert(w io.Writer, a wire.Alert) {
	times := "once"
	if a.Count != 1 {
		times = fmt.Sprintf("%d times", a.Count)
	}
	fmt.Fprintf(w, "cordon: monitor alert: %s: %s (%s, %s)\n", terminalSafe(a.Category), terminalSafe(a.Target), terminalSafe(a.Syscall), times)
}

// terminalSafe escapes what a sandbox-chosen name could use to drive the terminal or
// forge a line (termtext).
func terminalSafe(s string) string { return termtext.Line(s) }
