package mcp

import (
	"testing"

	"github.com/cordonhq/cordon/session/wire"
)

// TestHelperCapWithinProtocol: the file tools' helper asks a cap the supervisor takes.
func TestHelperCapWithinProtocol(t *testing.T) {
	for name, c := range map[string]int{"helperCap": helperCap, "MaxOutputChars": MaxOutputChars, "DefaultOutputChars": DefaultOutputChars} {
		if c > wire.MaxCap {
			t.Errorf("%s %d is above wire.MaxCap %d: the supervisor refuses it", name, c, wire.MaxCap)
		}
	}
}
