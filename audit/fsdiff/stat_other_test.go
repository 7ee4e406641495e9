//go:build !linux

package fsdiff

import (
	"testing"
	"time"
)

// indexStat skips the test: outside Linux the tracker never trusts an index entry's stat
// data (matchesIndex is false), so an attack that forges them has nothing to forge.
func indexStat(t *testing.T, _ statKey) (time.Time, uint32) {
	t.Helper()
	t.Skip("the git index's stat data are trusted only on Linux")
	return time.Time{}, 0
}
