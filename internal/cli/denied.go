package cli

import (
	"fmt"
	"io"
)

// printDenied writes the line `cordon run` and `cordon exec` end with for one destination
// the egress proxy refused, e.g.
//
//	cordon: egress denied: example.com:443 (not in network.allow; to allow: network.allow: [{host: example.com, ports: [443]}])
func printDenied(w io.Writer, dest, reason, rule string) {
	if rule != "" {
		reason += "; to allow: " + rule
	}
	fmt.Fprintf(w, "cordon: egress denied: %s (%s)\n", dest, reason)
}
