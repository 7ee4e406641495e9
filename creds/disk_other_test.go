//go:build !linux

package creds_test

import "testing"

// diskDir is an empty directory for WriteFiles to refuse (only Linux runs that part).
func diskDir(t *testing.T) string { return t.TempDir() }
