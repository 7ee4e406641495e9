package sandboxinit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// kernelFS are mounts every sandbox has that are read-write by nature and hold nothing
// of the host: a fresh /dev (tmpfs with device nodes), its pts, shm and mqueue, and /proc.
var kernelFS = map[string]string{
	"/dev": "tmpfs", "/dev/pts": "devpts", "/dev/shm": "tmpfs", "/dev/mqueue": "mqueue", "/proc": "proc",
	// The harmless device nodes a fresh /dev binds from the host's devtmpfs.
	"/dev/null": "devtmpfs", "/dev/zero": "devtmpfs", "/dev/full": "devtmpfs",
	"/dev/random": "devtmpfs", "/dev/urandom": "devtmpfs", "/dev/tty": "devtmpfs",
}

// selfCheck proves the boundary from inside before anything runs.
func selfCheck(spec *wire.Spec) error {
	mounts, err := precheck()
	if err != nil {
		return err
	}
	return specCheck(spec, mounts)
}

// precheck is the part of the self-check that needs no spec: loopback only, no
// capabilities, no_new_privs, process 1 not dumpable, no kernel interface writable. It
// returns the mount table for [specCheck]. Process 1 runs it while the host is still
// sending the spec (see [startPrecheck]). The mount table is read first: unless it
// proves /proc/sys read-only ([procSysReadOnly]), the walk of /proc/sys, the longest
// part, starts then, beside the other checks (each of them only reads, and none
// depends on another); the failures are reported in the same order as ever.
func precheck() ([]linux.MountInfo, error) {
	at := procSysMount() // the mount /proc/sys is reached on, for procSysReadOnly
	mi, mountErr := os.ReadFile("/proc/self/mountinfo")
	mounts := linux.ParseMountinfo(string(mi))
	sysctls := func() []string { return nil }
	if mountErr == nil && !procSysReadOnly(mounts, at) {
		sysctls = startSysctlWalk()
	}
	if err := loopbackOnly(); err != nil {
		return nil, err
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("reading process status: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "CapEff", "CapPrm", "CapBnd", "CapAmb":
			if n, err := strconv.ParseUint(v, 16, 64); err != nil || n != 0 {
				return nil, fmt.Errorf("capability set %s is %s; the sandbox must have none", k, v)
			}
		case "NoNewPrivs":
			if v != "1" {
				return nil, fmt.Errorf("no_new_privs is not set")
			}
		}
	}
	if d, err := linux.Dumpable(); err != nil || d {
		return nil, fmt.Errorf("process 1 is dumpable: commands could ptrace it or open its descriptors")
	}
	if mountErr != nil {
		return nil, fmt.Errorf("reading mount table: %w", mountErr)
	}
	if w := kernelWritable(sysctls()); len(w) > 0 {
		return nil, fmt.Errorf("%s is writable: no kernel interface may be", strings.Join(w, ", "))
	}
	return mounts, nil
}

// loopbackOnly fails when the network namespace has an interface other than loopback.
func loopbackOnly() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing network interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Name != "lo" {
			return fmt.Errorf("network interface %q is present; the sandbox must have loopback only", i.Name)
		}
	}
	return nil
}

// specCheck is the part of the self-check that needs the spec: the host uid the
// sandbox runs as, and no read-write mount the contract did not grant.
func specCheck(spec *wire.Spec, mounts []linux.MountInfo) error {
	if err := checkHostUID(spec.HostUID); err != nil {
		return err
	}
	return checkMounts(mounts, spec.Writable)
}

// startPrecheck runs [precheck] in the background; wait returns its result.
func startPrecheck() (wait func() ([]linux.MountInfo, error)) { return startCheck(precheck) }

// startCheck runs check (a precheck) in the background; wait returns its result.
func startCheck(check func() ([]linux.MountInfo, error)) (wait func() ([]linux.MountInfo, error)) {
	type result struct {
		mounts []linux.MountInfo
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := check()
		ch <- result{m, err}
	}()
	return func() ([]linux.MountInfo, error) {
		r := <-ch
		return r.mounts, r.err
	}
}

// checkHostUID fails when the sandbox is host root, whatever want says: no backend
// runs a sandbox as host root (a root-owned workspace runs as cordon's dedicated
// uid, bound through idmapped mounts), so a want of 0 is a host's mistake. Nested
// user namespaces (bwrap makes two) hide the host uid from a uid_map, so it asks the
// kernel's own files: sysctls always belong to host root, and show as the caller's
// uid exactly when the caller is host root.
func checkHostUID(want int) error {
	root, err := hostRoot()
	if err != nil {
		return err
	}
	switch {
	case root && want != 0:
		return fmt.Errorf("the sandbox runs as host uid 0, not %d", want)
	case root:
		return errors.New("the sandbox runs as host uid 0: no sandbox may be host root")
	}
	return nil
}

// hostRoot reports whether this process is uid 0 of the host. A sysctl file is host
// root's: it shows as the caller's uid when host root is mapped to it, and as the
// overflow uid (65534) when host root is not mapped at all. A caller whose own uid is
// the overflow uid cannot tell the two apart by owner, so it asks whether it may
// write the file, which only its owner may.
func hostRoot() (bool, error) {
	const sysctl = "/proc/sys/kernel/core_pattern"
	uid, _, err := linux.Owner(sysctl)
	if err != nil {
		return false, fmt.Errorf("a sysctl: %w", err)
	}
	euid := os.Geteuid()
	if uid != euid {
		return false, nil
	}
	if euid != overflowUID() {
		return true, nil
	}
	return linux.Writable(sysctl), nil
}

// overflowUID is the uid an unmapped owner shows as.
func overflowUID() int {
	data, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
		return n
	}
	return 65534
}

// kernelGlobal are file systems whose every file is an interface to the whole
// machine's kernel: never mounted read-write in a sandbox, granted or not.
var kernelGlobal = map[string]bool{
	"sysfs": true, "cgroup": true, "cgroup2": true, "debugfs": true, "tracefs": true,
	"securityfs": true, "binfmt_misc": true, "bpf": true, "configfs": true, "pstore": true,
	"efivarfs": true, "fusectl": true, "autofs": true, "rpc_pipefs": true, "nfsd": true,
}

// checkMounts fails on the first read-write mount that is neither granted nor one of
// the kernel file systems every sandbox has, and on any read-write mount of a file
// system that is a kernel-global interface.
func checkMounts(mounts []linux.MountInfo, writable []string) error {
	allowed := map[string]bool{}
	for _, w := range writable {
		allowed[w] = true
	}
	for _, m := range mounts {
		if !m.ReadOnly() && kernelGlobal[m.FSType] {
			return fmt.Errorf("%s is mounted read-write (%s): a kernel interface", m.Point, m.FSType)
		}
		if m.ReadOnly() || allowed[m.Point] || kernelFS[m.Point] == m.FSType {
			continue
		}
		return fmt.Errorf("%s is mounted read-write (%s) but the contract does not make it writable", m.Point, m.FSType)
	}
	return nil
}
