package ending

import (
	"strings"
	"testing"

	"github.com/cordonhq/cordon/session/wire"
)

// TestEndingSaysHowManyMore: denials the result does not list (past its first 1000,
// or counted in the log's net.deny.summary lines) are said in one line, and only when
// there are some.
func TestEndingSaysHowManyMore(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Summary
		want string
	}{
		{"none", Summary{Denied: []wire.Denial{{Destination: "a.example:443", Reason: "not in network.allow"}}}, ""},
		{"more", Summary{Denied: []wire.Denial{{Destination: "a.example:443", Reason: "not in network.allow"}}, More: 41000},
			"cordon: and 41000 more denied connection attempts (cordon audit show)\n"},
		{"only more", Summary{More: 3}, "cordon: and 3 more denied connection attempts (cordon audit show)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tc.e.Print(&b)
			got := b.String()
			if tc.want == "" && strings.Contains(got, "more denied connection attempts") {
				t.Errorf("a line for no more denials: %q", got)
			}
			if tc.want != "" && !strings.HasSuffix(got, tc.want) {
				t.Errorf("got %q; want it to end with %q", got, tc.want)
			}
		})
	}
}
