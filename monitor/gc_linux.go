package monitor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/cordonhq/cordon/internal/paths"
)

// sweep removes from a set's maps the runs whose cordon is gone, and returns them, and
// then the claims on slots of cordons that are gone, unless a run still registered
// names the slot (its owner, alive when runs were swept, ended since: the next sweep
// takes both). A slot freed so keeps its ring buffer and filter; the next holder
// drains and refills them. The caller holds the lock, under which every claim and
// registration is made whole, and recomputes the level mask.
func sweep(runs, claims *ebpf.Map) []Stale {
	var dead []Stale
	var id uint64
	var r monitorRun
	used := map[uint32]bool{}
	it := runs.Iterate()
	for it.Next(&id, &r) {
		if !ownerOf(r).Alive() {
			dead = append(dead, Stale{Cgroup: id, Owner: int(r.OwnerPid)})
		} else {
			used[r.Slot] = true
		}
	}
	if it.Err() != nil {
		used = nil // not known: no claim is taken
	}
	for _, s := range dead {
		runs.Delete(s.Cgroup)
	}
	if used == nil || claims == nil {
		return dead
	}
	var n uint32
	var c monitorClaim
	var gone []uint32
	ci := claims.Iterate()
	for ci.Next(&n, &c) {
		if !used[n] && !claimOwner(c).Alive() {
			gone = append(gone, n)
		}
	}
	for _, n := range gone {
		claims.Delete(n)
	}
	return dead
}

// GC removes, under $CORDON_BPF_ROOT or /sys/fs/bpf/cordon, the registrations of runs
// whose cordon is gone and then every program set no live run uses, detaching its
// programs; what a crashed loader left is removed too. A set a live run uses is kept.
func GC(ctx context.Context) (Collected, error) {
	return gc(ctx, paths.BPFRoot())
}

func gc(ctx context.Context, root string) (Collected, error) {
	var c Collected
	if _, err := os.Lstat(root); errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	lk, err := lockPins(ctx, root)
	if err != nil {
		return c, err
	}
	defer lk.Close()
	removeLoads(root)
	ents, err := os.ReadDir(root)
	if err != nil {
		return c, fmt.Errorf("monitor: reading %s: %w", root, err)
	}
	var errs []error
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), setPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		stale, live, err := gcSet(dir)
		c.Stale = append(c.Stale, stale...)
		switch {
		case err != nil:
			errs = append(errs, err)
		case live == 0:
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("monitor: removing %s: %w", dir, err))
				continue
			}
			c.Sets = append(c.Sets, dir)
		}
	}
	return c, errors.Join(errs...)
}

// gcSet sweeps dir's runs and says how many live ones are left. A set whose runs map
// this build cannot read (another version's layout) counts its entries as live; with
// none, or with no runs map at all, it is removed.
func gcSet(dir string) ([]Stale, int, error) {
	runs, err := ebpf.LoadPinnedMap(filepath.Join(dir, pinRuns), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("monitor: opening %s: %w", dir, err)
	}
	defer runs.Close()
	var r monitorRun
	if runs.KeySize() != 8 || int(runs.ValueSize()) != binary.Size(r) {
		return nil, countEntries(runs), nil
	}
	var claims *ebpf.Map
	if m, err := ebpf.LoadPinnedMap(filepath.Join(dir, pinClaims), nil); err == nil {
		defer m.Close()
		var c monitorClaim
		if m.KeySize() == 4 && int(m.ValueSize()) == binary.Size(c) {
			claims = m
		}
	}
	stale := sweep(runs, claims)
	live := countEntries(runs)
	if levels, err := ebpf.LoadPinnedMap(filepath.Join(dir, pinLevels), nil); err == nil {
		err = updateLevels(runs, levels)
		levels.Close()
		if err != nil {
			return stale, live, fmt.Errorf("monitor: %s: %w", dir, err)
		}
	}
	return stale, live, nil
}

func countEntries(m *ebpf.Map) int {
	n := 0
	var k, v []byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n
}
