package cli

import (
	"fmt"
	"io"
	"strings"
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

// terminalSafe escapes every byte of s outside printable ASCII (and the backslash) as \xNN.
func terminalSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' {
			fmt.Fprintf(&b, `\x%02x`, c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
