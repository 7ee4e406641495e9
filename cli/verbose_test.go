package cli

import (
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

// TestVerboseNetEscaped: `cordon run -v` shows each egress event and each summary on one
// line, with a hostile host's escape and line break shown as escapes, and a
// net.allow.summary by its JSON, which names the destinations and their counts.
func TestVerboseNetEscaped(t *testing.T) {
	evil := "a\x1b[2J\nb.test"
	tests := []struct {
		e    event.Event
		want string
	}{
		{event.Event{Type: event.NetDeny, Body: event.NetBody{Host: evil, Port: 443}}, `net.deny {Host:a\x1b[2J\x0ab.test Port:443`},
		{event.Event{Type: event.NetAllowSummary, Body: event.NetAllowSummaryBody{Allowed: 3, BytesUp: 7,
			Named: map[string]event.AllowedTo{evil + ":443": {Attempts: 3, BytesUp: 7}}}},
			`net.allow.summary {"allowed":3,"bytes_up":7,`},
	}
	for _, tt := range tests {
		line, ok := verboseNet(tt.e)
		if !ok || !strings.HasPrefix(line, tt.want) || strings.ContainsAny(line, "\x1b\n") {
			t.Errorf("verboseNet(%s) = %q, %v; want one escaped line starting %q", tt.e.Type, line, ok, tt.want)
		}
	}
	if line, ok := verboseNet(event.Event{Type: event.NetAllowSummary, Body: event.NetAllowSummaryBody{Named: map[string]event.AllowedTo{evil + ":443": {Attempts: 1}}}}); !ok || !strings.Contains(line, `"a\u001b[2J\nb.test:443":{"attempts":1`) {
		t.Errorf("summary line %q does not name the destination", line)
	}
	if _, ok := verboseNet(event.Event{Type: event.CmdStart}); ok {
		t.Errorf("cmd.start shown")
	}
}
