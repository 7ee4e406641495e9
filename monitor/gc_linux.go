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

// sweep removes the runs whose cordon is gone, and their entries in the per-run maps
// (ring buffers, path filters), from a set's maps, and returns them; and the entries of
// the per-run maps whose run has left (a cordon that unregistered its run but ended
// before it released them: pinned.release). The caller holds the lock, under which
// every registration is made whole, and recomputes the level mask.
func sweep(runs *ebpf.Map, perRun ...*ebpf.Map) []Stale {
	var dead []Stale
	var id uint64
	var r monitorRun
	live := map[uint64]bool{}
	it := runs.Iterate()
	for it.Next(&id, &r) {
		if !ownerOf(r).Alive() {
			dead = append(dead, Stale{Cgroup: id, Owner: int(r.OwnerPid)})
		} else {
			live[id] = true
		}
	}
	if it.Err() != nil {
		live = nil // not known: no orphan is taken
	}
	for _, s := range dead {
		runs.Delete(s.Cgroup)
		for _, m := range perRun {
			m.Delete(s.Cgroup)
		}
	}
	if live != nil {
		for _, m := range perRun {
			for _, orphan := range orphans(m, live) {
				m.Delete(orphan)
			}
		}
	}
	return dead
}

// orphans lists the keys of the per-run map m that are not live runs.
func orphans(m *ebpf.Map, live map[uint64]bool) []uint64 {
	var out []uint64
	var id uint64
	var v ebpf.MapID
	it := m.Iterate()
	for it.Next(&id, &v) {
		if !live[id] {
			out = append(out, id)
		}
	}
	return out
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
	var stale []Stale
	var perRun []*ebpf.Map
	for _, name := range []string{pinRings, pinFilters} {
		if m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil); err == nil {
			defer m.Close()
			perRun = append(perRun, m)
		}
	}
	stale = sweep(runs, perRun...)
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
