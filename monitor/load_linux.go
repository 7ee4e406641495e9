package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

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
	level     uint32 // depth of the cgroup below the v2 root
	hostPidns uint32 // nested: inode of cordon's pid namespace; 0 otherwise
}

func kernelConfig(opts Options) (config, error) {
	cfg := config{cgroupID: opts.CgroupID}
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

// loaded is the loaded collection and the section each program came from.
type loaded struct {
	*ebpf.Collection
	sections map[string]string
}

func load(cfg config, ringSize uint32) (*loaded, error) {
	spec, err := loadMonitor()
	if err != nil {
		return nil, fmt.Errorf("monitor: reading the embedded programs: %w", err)
	}
	for name, v := range map[string]any{
		"cfg_cgroup_id": cfg.cgroupID, "cfg_cgroup_level": cfg.level, "cfg_host_pidns": cfg.hostPidns,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("monitor: setting %s: %w", name, err)
		}
	}
	if ringSize != 0 {
		spec.Maps["events"].MaxEntries = ringSize
	}
	linux.RaiseMemlock()
	coll, err := ebpf.NewCollection(spec)
	switch {
	case errors.Is(err, syscall.EPERM):
		return nil, unavailable("the kernel refused to load BPF programs (needs root: CAP_BPF and CAP_PERFMON): %w", err)
	case err != nil:
		return nil, unavailable("loading the BPF programs: %w", err)
	}
	l := &loaded{Collection: coll, sections: map[string]string{}}
	for name, p := range spec.Programs {
		l.sections[name] = p.SectionName
	}
	return l, nil
}

// required are the programs without which the monitor does not start; the others
// attach where the kernel has their tracepoint (open(2) and creat(2) exist on some
// architectures only; kexec and module syscalls need their kernel options).
var required = map[string]bool{"tp_openat": true, "tp_connect": true, "on_exec": true}

// exitEvents are the syscall exits tp_exit attaches to: where a call whose arguments
// could not be read at entry is read again.
var exitEvents = []string{"sys_exit_openat", "sys_exit_openat2", "sys_exit_open", "sys_exit_creat", "sys_exit_connect"}

// attach attaches every program by its section name (tp_exit to every exitEvents).
func attach(l *loaded) ([]closer, error) {
	if err := ensureTracefs(); err != nil {
		return nil, err
	}
	var links []closer
	names := make([]string, 0, len(l.Programs))
	for name := range l.Programs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		prog, sec := l.Programs[name], l.sections[name]
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
				closeAll(links)
				return nil, unavailable("attaching %s (%s): %w", name, sec, err)
			}
			links = append(links, lk)
			continue
		default:
			closeAll(links)
			return nil, fmt.Errorf("monitor: program %s: unknown section %q", name, sec)
		}
		for _, ev := range events {
			lk, err := link.Tracepoint(group, ev, prog, nil)
			if errors.Is(err, os.ErrNotExist) && !required[name] {
				continue
			}
			if err != nil {
				closeAll(links)
				return nil, unavailable("attaching %s to %s/%s: %w", name, group, ev, err)
			}
			links = append(links, lk)
		}
	}
	return links, nil
}

func closeAll(links []closer) { closeLinks(links) }

// closeLinks detaches links in parallel: each detach of a tracepoint waits for an RCU
// grace period, and in parallel they share them (26 links: 1.9 s in series, ~0.1 s).
func closeLinks(links []closer) []error {
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Close(); err != nil {
				errs[i] = fmt.Errorf("detaching: %w", err)
			}
		}()
	}
	wg.Wait()
	return errs
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
