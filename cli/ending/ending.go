// Package ending prints what `cordon run` and `cordon exec` (and cordon-exec) end with
// on stderr: one line per destination the egress proxy refused and one per kind of
// monitor alert, terminal-safe. It links only the wire types and termtext, so the small
// cordon-exec client can print it too.
package ending

import (
	"fmt"
	"io"
	"os"

	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/session/wire"
)

// Denied writes the line `cordon run` and `cordon exec` end with for one destination
// the egress proxy refused, e.g.
//
//	cordon: egress denied: example.com:443 (not in network.allow; to allow: network.allow: [{host: example.com, ports: [443]}])
//
// The destination is what the sandbox asked for: every byte that is not printable ASCII
// is shown as \xNN, so no name can forge a line or reach the terminal as a control code.
func Denied(w io.Writer, dest, reason, rule string) {
	if rule != "" {
		reason += "; to allow: " + rule
	}
	fmt.Fprintf(w, "cordon: egress denied: %s (%s)\n", termtext.Line(dest), termtext.Line(reason))
}

// MaxLines bounds the lines of each kind `cordon run` and `cordon exec` end with; the
// rest are counted in one line (the audit log has every one).
const MaxLines = 20

// Summary is what a command's end says on stderr: one line per denied destination and
// one per kind of monitor alert, at most MaxLines of each.
type Summary struct {
	Denied []wire.Denial
	More   int // denied attempts past those Denied lists (the log counts them)
	Alerts []wire.Alert
}

// Print writes the summary to w; an empty one writes nothing.
func (e Summary) Print(w io.Writer) {
	if len(e.Denied)+len(e.Alerts)+e.More == 0 {
		return
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			// A terminal, which the command shared: whatever state its last bytes left
			// (concealed, black on black) is reset, on a line of cordon's own.
			fmt.Fprint(w, "\033[0m\n")
		}
	}
	for i, d := range e.Denied {
		if i == MaxLines {
			fmt.Fprintf(w, "cordon: and %d more denied destinations (cordon audit show)\n", len(e.Denied)-i)
			break
		}
		Denied(w, d.Destination, d.Reason, d.SuggestedRule)
	}
	if e.More > 0 {
		fmt.Fprintf(w, "cordon: and %d more denied connection attempts (cordon audit show)\n", e.More)
	}
	for i, a := range e.Alerts {
		if i == MaxLines {
			fmt.Fprintf(w, "cordon: and %d more kinds of monitor alert (cordon audit show)\n", len(e.Alerts)-i)
			break
		}
		Alert(w, a)
	}
}

// Alert writes the line for one kind of monitor alert, e.g.
//
//	cordon: monitor alert: write to a read-only path: /usr/bin/x (openat, 2 times)
//
// Only the category, what the command touched and the syscall are shown: the contract's
// path and why are in the log. Every byte outside printable ASCII is escaped.
func Alert(w io.Writer, a wire.Alert) {
	times := "once"
	if a.Count != 1 {
		times = fmt.Sprintf("%d times", a.Count)
	}
	switch {
	case a.Target == "" && a.Syscall == "":
		// A gap (events lost, a call it could not read): what it was is in the log.
		fmt.Fprintf(w, "cordon: monitor alert: %s (%s; cordon audit show says what)\n", termtext.Line(a.Category), times)
	case a.Syscall == "":
		fmt.Fprintf(w, "cordon: monitor alert: %s: %s (%s)\n", termtext.Line(a.Category), termtext.Line(a.Target), times)
	default:
		fmt.Fprintf(w, "cordon: monitor alert: %s: %s (%s, %s)\n", termtext.Line(a.Category), termtext.Line(a.Target), termtext.Line(a.Syscall), times)
	}
}
