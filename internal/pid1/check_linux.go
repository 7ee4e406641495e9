package pid1

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
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
func selfCheck(spec *Spec) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing network interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Name != "lo" {
			return fmt.Errorf("network interface %q is present; the sandbox must have loopback only", i.Name)
		}
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("reading process status: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "CapEff", "CapPrm", "CapBnd", "CapAmb":
			if n, err := strconv.ParseUint(v, 16, 64); err != nil || n != 0 {
				return fmt.Errorf("capability set %s is %s; the sandbox must have none", k, v)
			}
		case "NoNewPrivs":
			if v != "1" {
				return fmt.Errorf("no_new_privs is not set")
			}
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading mount table: %w", err)
	}
	return checkMounts(string(mi), spec.Writable)
}

// checkMounts fails on the first read-write mount that is neither granted nor one of
// the kernel file systems every sandbox has.
func checkMounts(mountinfo string, writable []string) error {
	allowed := map[string]bool{}
	for _, w := range writable {
		allowed[w] = true
	}
	for _, m := range linux.ParseMountinfo(mountinfo) {
		if m.ReadOnly() || allowed[m.Point] || kernelFS[m.Point] == m.FSType {
			continue
		}
		return fmt.Errorf("%s is mounted read-write (%s) but the contract does not make it writable", m.Point, m.FSType)
	}
	return nil
}
