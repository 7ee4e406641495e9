package runner

import (
	"fmt"
	"strings"
	"testing"
)

// TestTurnBounded: a turn keeps its changed paths within maxTurnPaths and
// maxTurnBytes whatever its commands change, counts the rest in More, and starts the
// next turn empty.
func TestTurnBounded(t *testing.T) {
	long := strings.Repeat("a", 1000)
	for _, tc := range []struct {
		name  string
		paths func(i int) string
		n     int
	}{
		{"many short", func(i int) string { return fmt.Sprintf("f%d", i) }, 3 * maxTurnPaths},
		{"long", func(i int) string { return fmt.Sprintf("%s/%d", long, i) }, 8000},
		{"escaped", func(i int) string { return fmt.Sprintf("%s\x01%d", strings.Repeat("\x01", 200), i) }, 8000},
	} {
		r := &run{}
		for i := range tc.n {
			r.noteTurn(tc.paths(i))
		}
		r.noteTurn(tc.paths(0)) // kept already: not counted again
		got, more := r.takeTurn()
		bytes := 0
		for _, p := range got {
			bytes += jsonLen(p)
		}
		if len(got) > maxTurnPaths || bytes > maxTurnBytes || len(got)+more != tc.n || more == 0 {
			t.Errorf("%s: kept %d paths (%d bytes), %d more; want at most %d paths, %d bytes, and the rest of %d counted",
				tc.name, len(got), bytes, more, maxTurnPaths, maxTurnBytes, tc.n)
		}
		if got, more := r.takeTurn(); len(got) != 0 || more != 0 {
			t.Errorf("%s: the next turn starts with %d paths, %d more", tc.name, len(got), more)
		}
	}
}
