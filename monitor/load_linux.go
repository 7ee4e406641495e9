package monitor

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
)

// Capabilities that loading and attaching the programs needs (CAP_SYS_ADMIN implies
// the others).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// unavailable wraps an error with errdefs.ErrUnavailable and the monitor's context.
func unavailable(format string, args ...any) error {
	return errdefs.Unavailablef("monitor: "+format, args...)
}

// preflight says, before anything is loaded, why BPF cannot be used here.
func preflight() error {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return unavailable("the kernel has no BTF (/sys/kernel/btf/vmlinux: %w); the monitor needs a kernel built with CONFIG_DEBUG_INFO_BTF", err)
	}
	caps, err := effectiveCaps()
	if err != nil {
		return unavailable("reading capabilities: %w", err)
	}
	if caps&(1<<capSysAdmin) == 0 && (caps&(1<<capBPF) == 0 || caps&(1<<capPerfmon) == 0) {
		return unavailable("loading BPF programs needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN); running as uid %d without them", os.Geteuid())
	}
	return nil
}

func effectiveCaps() (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// config is what the programs are specialised with before loading.
type config struct {
	cgroupID  uint64
	level     uint32        // depth of the cgroup below the v2 root
	hostPidns uint32        // nested: inode of cordon's pid namespace; 0 otherwise
	poll      time.Duration // the reader's poll after a wakeup: twice the programs' wake_ns
}

func kernelConfig(opts Options) (config, error) {
	cfg := config{cgroupID: opts.CgroupID, poll: pollInterval(opts)}
	level, err := cgroupLevel(opts.CgroupID)
	if err != nil {
		return cfg, err
	}
	cfg.level = level
	if opts.Nested {
		ino, ok := statIno("/proc/self/ns/pid")
		if !ok {
			return cfg, unavailable("cannot identify cordon's pid namespace (/proc/self/ns/pid)")
		}
		cfg.hostPidns = uint32(ino)
	}
	return cfg, nil
}

// cgroupLevel finds the cgroup v2 directory whose id is id and returns its depth.
func cgroupLevel(id uint64) (uint32, error) {
	root, _, err := linux.CgroupMounts()
	if err != nil || root == "" {
		return 0, unavailable("no cgroup v2 hierarchy (%v)", err)
	}
	level := -1
	errFound := errors.New("found")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if ino, ok := statIno(p); ok && ino == id {
			rel, _ := filepath.Rel(root, p)
			level = 0
			if rel != "." {
				level = strings.Count(rel, "/") + 1
			}
			return errFound
		}
		return nil
	})
	if level < 0 {
		return 0, fmt.Errorf("monitor: no cgroup with id %d under %s (%v)", id, root, err)
	}
	return uint32(level), nil
}

func statIno(p string) (uint64, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Ino, true
}

func statID(p string) (fileID, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{Dev: st.Dev, Ino: st.Ino}, true
}

// loadPinned loads the programs, attaches them and pins the links and the shared maps
// in a directory of its own under root, which it renames to dir once complete: a set
// in dir is never half made. The caller holds the lock, so no one else is loading and
// every load- directory left is a crashed loader's.
func loadPinned(root, dir string) (*pinned, error) {
	loads.Add(1)
	removeLoads(root)
	spec, err := loadMonitor()
	if err != nil {
		return nil, fmt.Errorf("monitor: reading the embedded programs: %w", err)
	}
	if err := ensureTracefs(); err != nil {
		return nil, err
	}
	linux.RaiseMemlock()
	coll, err := ebpf.NewCollection(spec)
	switch {
	case errors.Is(err, syscall.EPERM):
		return nil, unavailable("the kernel refused to load BPF programs (needs root: CAP_BPF and CAP_PERFMON): %w", err)
	case err != nil:
		return nil, unavailable("loading the BPF programs: %w", err)
	}
	defer coll.Close()
	tmp := filepath.Join(root, loadPrefix+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, unavailable("creating %s: %w", tmp, err)
	}
	if err := pinSet(tmp, spec, coll); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return nil, unavailable("publishing the program set: %w", err)
	}
	p := &pinned{root: root, dir: dir}
	for name, dst := range map[string]**ebpf.Map{pinRuns: &p.runs, pinClaims: &p.claims, pinRings: &p.rings, pinLevels: &p.levels, pinFilters: &p.filters} {
		*dst = coll.Maps[name]
		delete(coll.Maps, name) // kept open past coll.Close
	}
	return p, nil
}

// loads counts the program sets this process loaded (tests: a run joining a set loads
// none).
var loads atomic.Int64

// removeLoads removes what crashed loaders left under root (the caller holds the lock).
func removeLoads(root string) {
	matches, _ := filepath.Glob(filepath.Join(root, loadPrefix+"*"))
	for _, m := range matches {
		os.RemoveAll(m)
	}
}

// pinSet attaches coll's programs and pins the links, the shared maps and the manifest
// in dir.
func pinSet(dir string, spec *ebpf.CollectionSpec, coll *ebpf.Collection) error {
	links, err := attach(coll, spec)
	if err != nil {
		return err
	}
	defer closeLinks(links) // the pins hold them from here on
	for name, l := range links {
		if err := l.Pin(filepath.Join(dir, name)); err != nil {
			return unavailable("pinning %s: %w", name, err)
		}
	}
	for _, name := range []string{pinRuns, pinClaims, pinRings, pinLevels, pinFilters} {
		if err := coll.Maps[name].Pin(filepath.Join(dir, name)); err != nil {
			return unavailable("pinning map %s: %w", name, err)
		}
	}
	return pinManifestOf(filepath.Join(dir, pinManifest), coll)
}

// pinManifestOf records the name and tag of every program of coll in a map pinned at
// path, which a later run checks the attached programs against.
func pinManifestOf(path string, coll *ebpf.Collection) error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "cordon_manifest", Type: ebpf.Array, KeySize: 4, ValueSize: 24,
		MaxEntries: uint32(len(coll.Programs)),
	})
	if err != nil {
		return unavailable("creating the manifest: %w", err)
	}
	defer m.Close()
	names := make([]string, 0, len(coll.Programs))
	for name := range coll.Programs {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		info, err := coll.Programs[name].Info()
		if err != nil {
			return unavailable("reading program %s: %w", name, err)
		}
		var e manifestEntry
		copy(e.Name[:], truncName(name))
		if _, err := hex.Decode(e.Tag[:], []byte(info.Tag)); err != nil {
			return unavailable("program %s: tag %q: %w", name, info.Tag, err)
		}
		if err := m.Update(uint32(i), e, ebpf.UpdateAny); err != nil {
			return unavailable("writing the manifest: %w", err)
		}
	}
	if err := m.Pin(path); err != nil {
		return unavailable("pinning the manifest: %w", err)
	}
	return nil
}

// required are the programs without which the monitor does not start; the others
// attach where the kernel has their tracepoint (open(2) and creat(2) exist on some
// architectures only; kexec and module syscalls need their kernel options). A slice,
// so that it is data in the binary rather than a map built when cordon starts.
var required = []string{"tp_openat", "tp_connect", "on_exec"}

// exitEvents are the syscall exits tp_exit attaches to: where a call whose arguments
// could not be read at entry is read again.
var exitEvents = []string{"sys_exit_openat", "sys_exit_openat2", "sys_exit_open", "sys_exit_creat", "sys_exit_connect"}

// attach attaches every program by its section name (tp_exit to every exitEvents) and
// returns the links by pin name (link-PROGRAM or link-PROGRAM-EVENT).
func attach(coll *ebpf.Collection, spec *ebpf.CollectionSpec) (map[string]link.Link, error) {
	links := map[string]link.Link{}
	for name, prog := range coll.Programs {
		sec := spec.Programs[name].SectionName
		kind, rest, _ := strings.Cut(sec, "/")
		group, event, _ := strings.Cut(rest, "/")
		var events []string
		switch {
		case name == "tp_exit":
			events = exitEvents
		case kind == "tracepoint":
			events = []string{event}
		case kind == "tp_btf":
			lk, err := link.AttachTracing(link.TracingOptions{Program: prog})
			if err != nil {
				closeLinks(links)
				return nil, unavailable("attaching %s (%s): %w", name, sec, err)
			}
			links[linkPrefix+name] = lk
			continue
		default:
			closeLinks(links)
			return nil, fmt.Errorf("monitor: program %s: unknown section %q", name, sec)
		}
		for _, ev := range events {
			lk, err := link.Tracepoint(group, ev, prog, nil)
			if errors.Is(err, os.ErrNotExist) && !slices.Contains(required, name) {
				continue
			}
			if err != nil {
				closeLinks(links)
				return nil, unavailable("attaching %s to %s/%s: %w", name, group, ev, err)
			}
			links[linkPrefix+name+"-"+ev] = lk
		}
	}
	return links, nil
}

// closeLinks closes links in parallel. A link that is pinned stays attached; one that
// is not is detached, which for a tracepoint waits for an RCU grace period, shared when
// they run in parallel (26 links: 1.9 s in series, ~0.1 s).
func closeLinks(links map[string]link.Link) {
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Close()
		}()
	}
	wg.Wait()
}

// ensureTracefs mounts tracefs at /sys/kernel/tracing when no tracefs is mounted:
// syscall tracepoints are found through it.
func ensureTracefs() error {
	for _, p := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
	}
	if err := linux.MountTracefs("/sys/kernel/tracing"); err != nil {
		return unavailable("tracefs is not mounted and mounting it at /sys/kernel/tracing failed: %w", err)
	}
	return nil
}
