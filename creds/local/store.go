package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/atomicfile"
)

// entry is what the store keeps of one token, in ROOT/local/SHA256.json (mode 0600).
// The token itself is never stored.
type entry struct {
	V         int       `json:"v"`
	Run       string    `json:"run"`
	Name      string    `json:"name"`
	Scopes    []string  `json:"scopes"`
	IssuedAt  time.Time `json:"iat"`
	ExpiresAt time.Time `json:"exp"`
}

const storeVersion = 1

// storeDir is where the tokens of the ledger at root are kept.
func storeDir(root string) string { return filepath.Join(root, "local") }

func entryPath(dir, hash string) string { return filepath.Join(dir, hash+".json") }

func writeEntry(dir, hash string, e entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return atomicfile.Write(entryPath(dir, hash), append(data, '\n'), 0o600)
}

// readEntry reads the entry of a token hash; os.ErrNotExist if there is none.
func readEntry(dir, hash string) (entry, error) {
	data, err := os.ReadFile(entryPath(dir, hash))
	if err != nil {
		return entry{}, err
	}
	var e entry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.V != storeVersion {
		return entry{}, fmt.Errorf("local token store: unreadable entry %s (version %d): %w", hash[:16], e.V, err)
	}
	return e, nil
}

// each calls fn for every readable entry of the store.
func each(dir string, fn func(hash string, e entry) error) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, de := range ents {
		hash, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !isHash(hash) {
			continue
		}
		e, err := readEntry(dir, hash)
		if errors.Is(err, os.ErrNotExist) {
			continue // revoked meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := fn(hash, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
