package creds

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
)

// SecretsDir is where the sandbox finds credentials delivered as files:
// SecretsDir/NAME, mode 0400, on a tmpfs.
const SecretsDir = paths.SandboxSecrets

// ErrNotTmpfs: a directory meant for secret files is on a filesystem that keeps them
// after the run (a value written there would outlive its revocation on disk).
var ErrNotTmpfs = errors.New("not a tmpfs")

// Env returns NAME=value for every grant delivered as an environment variable, to be
// appended to the sandbox's environment.
func Env(grants []Grant) []string {
	var env []string
	for _, g := range grants {
		if g.Deliver == contract.DeliverEnv || g.Deliver == "" {
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
		if g.Deliver != contract.DeliverFile {
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

// CABundleFile is the name, in [SecretsDir], of the CA bundle a run with credentials
// delivered by proxy trusts: the host's roots plus the run's own CA. It cannot clash with
// a credential's name, which has no '-' or '.'.
const CABundleFile = "ca-bundle.pem"

// CAEnv are the variables that point common TLS clients at the CA bundle (OpenSSL and Go,
// curl, Node, Python requests, git).
var CAEnv = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO"}

// Placeholder returns a random stand-in for value, shaped like it: the same prefix up to
// its last separator ('_', '-' or '.') in the first 16 bytes ("ghs_", "cordon_",
// "hvs."), then the same length of random characters of the same classes. It is what the
// sandbox holds for a credential delivered by proxy; it is valid nowhere.
func Placeholder(value string) string {
	const (
		lower  = "abcdefghijklmnopqrstuvwxyz"
		upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		digits = "0123456789"
	)
	if len(value) < 16 {
		return "cordon_placeholder_" + randomFrom(lower+digits, 16)
	}
	keep := 0
	for i := 0; i < 16; i++ {
		if c := value[i]; c == '_' || c == '-' || c == '.' {
			keep = i + 1
		}
	}
	for {
		b := []byte(value[:keep])
		for i := keep; i < len(value); i++ {
			switch c := value[i]; {
			case c >= 'a' && c <= 'z':
				b = append(b, randomFrom(lower, 1)...)
			case c >= 'A' && c <= 'Z':
				b = append(b, randomFrom(upper, 1)...)
			case c >= '0' && c <= '9':
				b = append(b, randomFrom(digits, 1)...)
			case c == '_' || c == '-' || c == '.':
				b = append(b, c)
			default:
				b = append(b, randomFrom(lower+digits, 1)...)
			}
		}
		if p := string(b); p != value && !strings.Contains(value, p) {
			return p
		}
	}
}

func randomFrom(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}
