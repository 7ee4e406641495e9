package creds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/internal/atomicfile"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
)

// DefaultRoot is the ledger's directory ([paths.Ledger]): /var/lib/cordon/ledger for
// root, else beside the audit root by the same rule ($XDG_STATE_HOME/cordon/ledger
// when XDG_STATE_HOME is absolute, else ~/.local/state/cordon/ledger). It is among the
// paths no contract can expose to a sandbox ([paths.Protected]).
func DefaultRoot() string { return paths.Ledger() }

// States of a ledger record.
const (
	statePending = "pending" // written before the provider is asked; no revoke reference yet
	stateIssued  = "issued"
)

const ledgerVersion = 1

// record is one outstanding grant in the ledger: everything revocation needs and
// nothing more. Field names are a file format; version changes are refused.
type record struct {
	V         int              `json:"v"`
	Run       string           `json:"run"`
	Name      string           `json:"name"`
	Provider  string           `json:"provider"`
	Deliver   contract.Deliver `json:"deliver"`
	Scope     map[string]any   `json:"scope,omitempty"`
	TTLSec    int64            `json:"ttl_s"`
	State     string           `json:"state"`
	ID        string           `json:"id,omitempty"`
	IssuedAt  time.Time        `json:"issued_at"`
	ExpiresAt time.Time        `json:"expires_at"`
	SHA256    string           `json:"sha256,omitempty"` // of the value: identifies it, reveals nothing
	RevokeRef string           `json:"revoke_ref,omitempty"`
	Owner     owner.Process    `json:"owner"` // while it lives, the grant is its to revoke; once gone, gc's
}

// grant is the record as a Grant for Revoke: no secret, ever.
func (r *record) grant() Grant {
	return Grant{
		Run: r.Run, Name: r.Name, Provider: r.Provider, Deliver: r.Deliver, Scope: r.Scope,
		ID: r.ID, IssuedAt: r.IssuedAt, ExpiresAt: r.ExpiresAt, RevokeRef: r.RevokeRef,
	}
}

var (
	runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`) })
	namePattern  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })
)

// ledger is the directory of outstanding grants: ROOT/grants/RUN/NAME.json, each file
// written atomically with mode 0600 and removed once its grant is revoked or expired.
// Files of different runs never collide, so concurrent cordon processes need no lock.
type ledger struct {
	dir string
}

func openLedger(root string) (*ledger, error) {
	// Made, or checked, all the way up (paths.MakeDir): a ledger under a directory
	// another user controls would let that user choose what gc revokes, or hide grants.
	if err := paths.MakeDir(root, paths.Owner()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	dir := filepath.Join(root, "grants")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	if err := checkPrivate(dir); err != nil {
		return nil, err
	}
	return &ledger{dir: dir}, nil
}

func (l *ledger) path(run, name string) string {
	return filepath.Join(l.dir, run, name+".json")
}

// put writes r durably.
func (l *ledger) put(r *record) error {
	if !runIDPattern().MatchString(r.Run) || !namePattern().MatchString(r.Name) {
		return fmt.Errorf("%w: bad run id %q or name %q", ErrLedger, r.Run, r.Name)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLedger, err)
	}
	// A concurrent Reconcile may remove the run's directory while it is still empty
	// (or its temporary file while it is the only one): make it again and retry.
	for try := 0; ; try++ {
		if err := os.Mkdir(filepath.Join(l.dir, r.Run), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %w", ErrLedger, err)
		}
		err = atomicfile.Write(l.path(r.Run, r.Name), append(data, '\n'), 0o600)
		if err == nil {
			return nil
		}
		if try == 2 || !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: writing %s/%s: %w", ErrLedger, r.Run, r.Name, err)
		}
	}
}

// remove deletes a record, and its run's directory once empty.
func (l *ledger) remove(run, name string) error {
	if err := atomicfile.Remove(l.path(run, name)); err != nil {
		return fmt.Errorf("%w: removing %s/%s: %w", ErrLedger, run, name, err)
	}
	// Fails while other records remain: that is the point.
	if os.Remove(filepath.Join(l.dir, run)) == nil {
		atomicfile.SyncDir(l.dir)
	}
	return nil
}

// prune removes what a write interrupted by a crash left in a dead run's directory
// (temporary files), and the directory once it is empty. When the run had no record,
// nothing says its cordon is dead: a run starting right now has made its directory or
// temporary file but has no record yet. Then only what has not changed for staleAfter
// goes.
func (l *ledger) prune(run string, dead bool) {
	dir := filepath.Join(l.dir, run)
	gone := func(p string) bool {
		if dead {
			return true
		}
		st, err := os.Lstat(p)
		return err == nil && time.Since(st.ModTime()) > staleAfter
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	for _, p := range tmps {
		if gone(p) {
			os.Remove(p)
		}
	}
	if gone(dir) && os.Remove(dir) == nil {
		atomicfile.SyncDir(l.dir)
	}
}

// staleAfter is how old (by the file system's clock) a leftover must be to be pruned.
const staleAfter = time.Minute

// runs lists the run ids that have records.
func (l *ledger) runs() ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && runIDPattern().MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// records reads a run's records. Records that do not parse are reported and skipped.
func (l *ledger) records(run string) ([]*record, error) {
	dir := filepath.Join(l.dir, run)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLedger, err)
	}
	var out []*record
	var errs []error
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue // a temporary file of a write that did not finish
		}
		data, err := paths.ReadRecord(filepath.Join(dir, e.Name()), paths.Owner())
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrLedger, err))
			continue
		}
		var r record
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || r.V != ledgerVersion || r.Run != run || r.Name != name {
			errs = append(errs, fmt.Errorf("%w: %s/%s: unreadable record (version %d): %w", ErrLedger, run, e.Name(), r.V, err))
			continue
		}
		out = append(out, &r)
	}
	return out, errors.Join(errs...)
}
