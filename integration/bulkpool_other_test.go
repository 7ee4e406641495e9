//go:build !linux

package integration

import "testing"

// sharedBulk is bigWorkspace(t, w, 32000) where the tree cannot be lent between
// tests (bulkpool_linux_test.go).
func sharedBulk(t *testing.T, w *world) {
	t.Helper()
	bigWorkspace(t, w, 32000)
}

func removeBulkPool() {}
