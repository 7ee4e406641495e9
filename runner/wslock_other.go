//go:build !linux

package runner

// workspaceAliases: no mount table to read here; a workspace is held by its path's
// directories alone.
func workspaceAliases(string) []string { return nil }
