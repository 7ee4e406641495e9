package cli

import (
	"strings"
	"testing"
)

func TestPrintDenied(t *testing.T) {
	var b strings.Builder
	printDenied(&b, "example.com:443", "not in network.allow", "network.allow: [{host: example.com, ports: [443]}]")
	printDenied(&b, "0x7f.1:443", "malformed request", "")
	want := "cordon: egress denied: example.com:443 (not in network.allow; to allow: network.allow: [{host: example.com, ports: [443]}])\n" +
		"cordon: egress denied: 0x7f.1:443 (malformed request)\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}
