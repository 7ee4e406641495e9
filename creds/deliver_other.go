//go:build !linux

package creds

import "os"

const oNoFollow = 0

// checkTmpfs cannot tell a tmpfs outside Linux; it checks that dir is a directory.
func checkTmpfs(dir string) error {
	_, err := os.ReadDir(dir)
	return err
}
