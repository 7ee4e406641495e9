package creds

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SecretsDir is where the sandbox finds credentials delivered as files:
// SecretsDir/NAME, mode 0400, on a tmpfs.
const SecretsDir = "/run/cordon/secrets"

// ErrNotTmpfs: a directory meant for secret files is on a filesystem that keeps them
// after the run (a value written there would outlive its revocation on disk).
var ErrNotTmpfs = errors.New("not a tmpfs")

// Env returns NAME=value for every grant delivered as an environment variable, to be
// appended to the sandbox's environment.
func Env(grants []Grant) []string {
	var env []string
	for _, g := range grants {
		if g.Deliver == "env" || g.Deliver == "" {
			env = append(env, g.Name+"="+g.Secret.Reveal())
		}
	}
	return env
}

// WriteFiles writes every grant delivered as a file to dir/NAME (mode 0400, created
// exclusively, never through a symbolic link), for the runner to mount read-only at
// [SecretsDir]. dir must be on a tmpfs (on Linux; [ErrNotTmpfs] otherwise) so that no
// value reaches a disk; the runner removes it with the run directory.
func WriteFiles(dir string, grants []Grant) error {
	if err := checkTmpfs(dir); err != nil {
		return err
	}
	for _, g := range grants {
		if g.Deliver != "file" {
			continue
		}
		if !namePattern().MatchString(g.Name) {
			return fmt.Errorf("writing credential file: bad name %q", g.Name)
		}
		f, err := os.OpenFile(filepath.Join(dir, g.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o400)
		if err != nil {
			return fmt.Errorf("writing credential file %s: %w", g.Name, err)
		}
		_, err = f.WriteString(g.Secret.Reveal())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing credential file %s: %w", g.Name, err)
		}
	}
	return nil
}
