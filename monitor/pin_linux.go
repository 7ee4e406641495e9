package monitor

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
)

// The programs are loaded, attached and pinned in bpffs once per host and version of
// the programs, and shared by every monitored run (docs/monitor.md, "Shared programs").
// A run claims a slot, a ring buffer and a path filter kept between runs, and
// registers its cgroup in `runs` naming the slot; at its end it leaves `runs` and frees
// the slot for the next run. Adding or removing an entry of a map of maps (`rings`,
// `filters`) waits in the kernel for a grace period of RCU (4-16 ms on the 2-core VM of
// the benchmarks), so a run does neither unless no slot is free. Loading, claiming and
// sweeping happen under one host-wide flock ([paths.BPFLock]), so two runs never both
// load or share a slot, and gc never removes what a run is joining.

// Pin names inside a set's directory.
const (
	pinRuns     = "runs"
	pinClaims   = "claims"
	pinRings    = "rings"
	pinLevels   = "levels"
	pinFilters  = "filters"
	pinManifest = "manifest" // the name and tag of every program loaded with the set
	linkPrefix  = "link-"    // link-PROGRAM[-EVENT]: one attachment (bpffs refuses dots in names)
	loadPrefix  = "load-"    // ROOT/load-PID: a set being loaded
	setPrefix   = "v-"       // ROOT/v-HASH: a complete set
)

// maxLevel bounds the depth of a run's cgroup (MAX_LEVEL in bpf/maps.h).
const maxLevel = 16

// maxSlots bounds the slots of a set (MAX_SLOTS in bpf/maps.h), hence the runs monitored
// at once on a host: a run that finds every one claimed by a live cordon is refused
// (errdefs.ErrUnavailable; monitor.mode decides what the run does), never left
// unwatched.
const maxSlots = 1024

// setName names the set of the programs embedded in this binary: another build of
// cordon, whose maps may be laid out differently, pins its own set beside it.
func setName() string {
	sum := sha256.Sum256(_MonitorBytes)
	return setPrefix + hex.EncodeToString(sum[:8])
}

// pinned is a set of shared programs as one run holds it: the maps it registers in.
// The programs themselves are held by their pinned links, not by the run.
type pinned struct {
	root, dir                            string
	runs, claims, rings, levels, filters *ebpf.Map
}

func (p *pinned) Close() {
	for _, m := range []*ebpf.Map{p.runs, p.claims, p.rings, p.levels, p.filters} {
		if m != nil {
			m.Close()
		}
	}
}

// entry is one run's registration.
type entry struct {
	cgroup uint64
	run    monitorRun
}

func newEntry(cfg config, o owner.Process) entry {
	ns, _ := strconv.ParseUint(o.PIDNS, 10, 32)
	return entry{cgroup: cfg.cgroupID, run: monitorRun{
		Level: cfg.level, HostPidns: cfg.hostPidns, WakeNs: uint64(cfg.poll / 2),
		OwnerPid: uint32(o.PID), OwnerStart: o.Start, OwnerPidns: uint32(ns),
	}}
}

// ownerOf is the cordon process that registered r.
func ownerOf(r monitorRun) owner.Process {
	o := owner.Process{PID: int(r.OwnerPid), Start: r.OwnerStart}
	if r.OwnerPidns != 0 {
		o.PIDNS = strconv.FormatUint(uint64(r.OwnerPidns), 10)
	}
	return o
}

// claimOf is e's claim on a slot.
func claimOf(e entry) monitorClaim {
	return monitorClaim{OwnerStart: e.run.OwnerStart, OwnerPid: e.run.OwnerPid, OwnerPidns: e.run.OwnerPidns, Cgroup: e.cgroup}
}

// claimOwner is the cordon process holding the claim c.
func claimOwner(c monitorClaim) owner.Process {
	return ownerOf(monitorRun{OwnerPid: c.OwnerPid, OwnerStart: c.OwnerStart, OwnerPidns: c.OwnerPidns})
}

// hostLock is the exclusive lock on root's pins; Close releases it.
type hostLock struct{ f *os.File }

func (l hostLock) Close() { l.f.Close() }

// lockPins takes the lock on root's pins, waiting for it as long as ctx allows.
func lockPins(ctx context.Context, root string) (hostLock, error) {
	path := paths.BPFLock(root)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return hostLock{}, unavailable("creating the pin lock's directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return hostLock{}, unavailable("opening the pin lock: %w", err)
	}
	for {
		ok, err := linux.TryLock(f)
		if err != nil {
			f.Close()
			return hostLock{}, unavailable("locking %s: %w", path, err)
		}
		if ok {
			return hostLock{f}, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return hostLock{}, fmt.Errorf("monitor: waiting for %s: %w", path, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// ensureRoot makes root, on a bpffs, readable by root only. A bpffs is mounted at
// /sys/fs/bpf when none is and root is in it; another root ($CORDON_BPF_ROOT) must be
// on one. The caller holds the lock.
func ensureRoot(root string) error {
	parent := filepath.Dir(root)
	if t, err := linux.FilesystemType(parent); err != nil || t != linux.BPFFSMagic {
		if parent != filepath.Dir(paths.DefaultBPFRoot) {
			return unavailable("%s is not on a bpffs ($%s)", root, paths.BPFRootEnv)
		}
		if err := linux.MountBPFFS(parent); err != nil {
			return unavailable("no bpffs at %s and mounting one failed: %w", parent, err)
		}
	}
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return unavailable("creating %s: %w", root, err)
	}
	// Root only: the pins give whoever can open them the programs and every run's
	// ring buffer.
	if err := os.Chmod(root, 0o700); err != nil {
		return unavailable("restricting %s: %w", root, err)
	}
	return nil
}

// join registers e with the shared programs under root, loading, attaching and
// pinning them first when they are not there yet: it claims a slot whose ring buffer
// holds ringSize bytes and fills its filter with entries (ok false: no filter, every
// open is sent).
func join(ctx context.Context, root string, e entry, ringSize uint32, entries map[string]uint8, ok bool) (*pinned, *slot, error) {
	if e.run.Level == 0 || e.run.Level >= maxLevel {
		return nil, nil, unavailable("the run's cgroup is at depth %d; the monitor watches depths 1 to %d", e.run.Level, maxLevel-1)
	}
	lk, err := lockPins(ctx, root)
	if err != nil {
		return nil, nil, err
	}
	defer lk.Close()
	if err := ensureRoot(root); err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(root, setName())
	p, err := openPinned(root, dir)
	if errors.Is(err, fs.ErrNotExist) {
		p, err = loadPinned(root, dir)
	}
	if err != nil {
		return nil, nil, err
	}
	sweep(p.runs, p.claims)
	s, err := p.claim(claimOf(e), ringSize)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	if err := p.register(e, s, entries, ok); err != nil {
		p.drop(s)
		p.Close()
		return nil, nil, err
	}
	return p, s, nil
}

// register fills s's filter and adds e, naming s, to the runs: the programs send
// nothing for the run before the filter is the run's own. The caller holds the lock.
func (p *pinned) register(e entry, s *slot, entries map[string]uint8, ok bool) error {
	if !ok {
		entries = nil // no filter: an empty one, every open is sent
	}
	if err := refill(s.filter, entries); err != nil {
		return unavailable("filling the run's path filter: %w", err)
	}
	e.run.Slot, e.run.Ticket = s.n, s.ticket
	if err := p.runs.Update(e.cgroup, e.run, ebpf.UpdateAny); err != nil {
		return unavailable("registering the run's cgroup: %w", err)
	}
	if err := updateLevels(p.runs, p.levels); err != nil {
		p.runs.Delete(e.cgroup)
		return unavailable("registering the run's cgroup level: %w", err)
	}
	return nil
}

// leave removes the run of cgroup id and returns its counters at the end: the
// programs, which look a cgroup up among the runs first, send nothing more for it.
// Its slot stays claimed until [pinned.release]. The level mask is recomputed under
// the lock, and left with a stale bit (an extra lookup, nothing more) if the lock
// cannot be had.
func (p *pinned) leave(ctx context.Context, id uint64) (monitorRun, error) {
	// Taken and removed in one step (BPF_MAP_LOOKUP_AND_DELETE_ELEM): an event lost
	// between a read of the counters and the delete would go unreported.
	// Kernels before 5.14 have it for queues only: there, read, then delete.
	var lost monitorRun
	err := p.runs.LookupAndDelete(id, &lost)
	if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, syscall.EINVAL) {
		lost = p.counters(id)
		err = p.runs.Delete(id)
	}
	errs := []error{err}
	lk, err := lockPins(ctx, p.root)
	if err == nil {
		errs = append(errs, updateLevels(p.runs, p.levels))
		lk.Close()
	}
	errs = append(errs, err)
	if err := keyGone(errs); err != nil {
		return lost, fmt.Errorf("monitor: unregistering the run: %w", err)
	}
	return lost, nil
}

// counters is the entry of the run of cgroup id: what it lost and what was filtered.
func (p *pinned) counters(id uint64) monitorRun {
	var r monitorRun
	if err := p.runs.Lookup(id, &r); err != nil {
		return monitorRun{}
	}
	return r
}

// updateLevels sets the level mask from the runs registered. The caller holds the lock.
func updateLevels(runs, levels *ebpf.Map) error {
	var mask uint64
	var id uint64
	var r monitorRun
	it := runs.Iterate()
	for it.Next(&id, &r) {
		if r.Level < maxLevel {
			mask |= 1 << r.Level
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	return levels.Update(uint32(0), mask, ebpf.UpdateAny)
}

// openPinned opens the set in dir after checking that it is cordon's: its maps have the
// layout this binary's programs use, and every attached program is one loaded with the
// set, with the tag recorded then. It returns an error wrapping fs.ErrNotExist when
// there is no set. (The embedded spec is not parsed: that costs more than the rest.)
func openPinned(root, dir string) (*pinned, error) {
	if _, err := os.Lstat(dir); err != nil {
		return nil, err
	}
	p := &pinned{root: root, dir: dir}
	for _, want := range sharedMaps() {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, want.name), nil)
		if err == nil && (m.Type() != want.typ || m.KeySize() != want.key || m.ValueSize() != want.value) {
			m.Close()
			err = fmt.Errorf("%v with %d-byte keys and %d-byte values", m.Type(), m.KeySize(), m.ValueSize())
		}
		if err != nil {
			p.Close()
			return nil, unavailable("%s is not cordon's program set (map %s: %v); `cordon gc` removes it when no run uses it", dir, want.name, err)
		}
		switch want.name {
		case pinRuns:
			p.runs = m
		case pinClaims:
			p.claims = m
		case pinRings:
			p.rings = m
		case pinLevels:
			p.levels = m
		case pinFilters:
			p.filters = m
		}
	}
	if err := verifyLinks(dir); err != nil {
		p.Close()
		return nil, unavailable("%s is not cordon's program set: %w; `cordon gc` removes it when no run uses it", dir, err)
	}
	return p, nil
}

// sharedMaps are the maps a set shares with its runs, as bpf/maps.h declares them
// (a function: binary.Size is reflection, not worth running when cordon starts).
func sharedMaps() []sharedMap {
	return []sharedMap{
		{pinRuns, ebpf.Hash, 8, uint32(binary.Size(monitorRun{}))},
		{pinClaims, ebpf.Hash, 4, uint32(binary.Size(monitorClaim{}))},
		{pinRings, ebpf.ArrayOfMaps, 4, 4},
		{pinLevels, ebpf.Array, 4, 8},
		{pinFilters, ebpf.ArrayOfMaps, 4, 4},
	}
}

// sharedMap is one map of sharedMaps.
type sharedMap struct {
	name       string
	typ        ebpf.MapType
	key, value uint32
}

// manifestEntry is one program of a set as pinManifest records it.
type manifestEntry struct {
	Name [16]byte
	Tag  [8]byte
}

// verifyLinks checks that every pinned link of dir attaches a program of the set's
// manifest, with its tag, and that the required ones are attached. The links are
// checked in parallel (six system calls each).
func verifyLinks(dir string) error {
	want, err := readManifest(filepath.Join(dir, pinManifest))
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var links []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), linkPrefix) {
			links = append(links, e.Name())
		}
	}
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, pin := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = verifyLink(filepath.Join(dir, pin), want)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, name := range required {
		if !slices.ContainsFunc(links, func(pin string) bool { return strings.HasPrefix(pin, linkPrefix+name+"-") || pin == linkPrefix+name }) {
			return fmt.Errorf("program %s is not attached", name)
		}
	}
	return nil
}

// verifyLink checks the link pinned at path (link-PROGRAM[-EVENT]): it attaches
// PROGRAM, with the tag the manifest has for it.
func verifyLink(path string, manifest map[string]string) error {
	name, tag, err := linkedProgram(path)
	if err != nil {
		return fmt.Errorf("link %s: %w", filepath.Base(path), err)
	}
	prog, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(path), linkPrefix), "-")
	// The kernel keeps 15 bytes of a name; the library may restore the rest from BTF.
	if want, ok := manifest[truncName(prog)]; !ok || truncName(name) != truncName(prog) || want != tag {
		return fmt.Errorf("link %s attaches program %q (tag %s), not cordon's %s", filepath.Base(path), name, tag, prog)
	}
	return nil
}

// linkedProgram is the name and tag of the program the link pinned at path attaches.
func linkedProgram(path string) (name, tag string, err error) {
	l, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return "", "", err
	}
	defer l.Close()
	li, err := l.Info()
	if err != nil {
		return "", "", err
	}
	prog, err := ebpf.NewProgramFromID(li.Program)
	if err != nil {
		return "", "", err
	}
	defer prog.Close()
	pi, err := prog.Info()
	if err != nil {
		return "", "", err
	}
	return pi.Name, pi.Tag, nil
}

// truncName is a program name as the kernel keeps it (BPF_OBJ_NAME_LEN - 1 bytes).
func truncName(s string) string {
	if len(s) > 15 {
		return s[:15]
	}
	return s
}

func readManifest(path string) (map[string]string, error) {
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer m.Close()
	out := map[string]string{}
	var k uint32
	var v manifestEntry
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[strings.TrimRight(string(v.Name[:]), "\x00")] = hex.EncodeToString(v.Tag[:])
	}
	return out, it.Err()
}
