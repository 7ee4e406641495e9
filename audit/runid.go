package audit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
)

// runIDPattern: a UTC timestamp to the second and 24 random bits, so that ids sort by
// creation time and never contain a path separator or "..".
var runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$`) })

// NewRunID returns a fresh run id for a run created at t, such as
// 20261129T201530Z-3fa9c1. Ids sort lexicographically by creation time (to the second).
func NewRunID(t time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// ValidateRunID reports whether id is a well-formed run id. Every function that turns an
// id into a path calls it, so an id read from a command line cannot escape the root.
func ValidateRunID(id string) error {
	if !runIDPattern().MatchString(id) {
		return fmt.Errorf("%w: %q", ErrInvalidRunID, id)
	}
	return nil
}

// DefaultRoot returns the default audit root: $XDG_STATE_HOME/cordon/runs when
// XDG_STATE_HOME is an absolute path, else ~/.local/state/cordon/runs
// ([paths.AuditRoot], the rule the credential ledger follows too).
func DefaultRoot() (string, error) {
	root, err := paths.AuditRoot()
	if err != nil {
		return "", fmt.Errorf("default audit root: %w", err)
	}
	return root, nil
}
