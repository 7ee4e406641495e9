package pid1

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/net/bpf"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/seccomp"
)

// joinFD is the cgroup directory's descriptor in the trampoline.
const joinFD = 3

// Paths every sandbox has that the Landlock ruleset adds to the Plan's.
var (
	confineRead    = []string{"/proc", "/run/cordon"}
	confineDevices = []string{"/dev"}
	confineList    = []string{"/"}
)

// rules is the Landlock ruleset for c.
func (c Confine) rules() linux.FSRules {
	return linux.FSRules{
		Read:    c.Read,
		Write:   c.Write,
		Devices: confineDevices,
		List:    append(append([]string(nil), confineList...), c.List...),
	}
}

// carve turns read into paths that cover the same trees except every path in hide:
// a read path above a hidden one is replaced by its entries other than the one on
// the way down, level by level, and becomes list-only itself. Landlock only grants,
// so this is how a tree is granted with a hole in it (the files protocol's FIFOs
// under /run/cordon: a command holding the status FIFO open would keep process 1
// from noticing that cordon died). It reads directories once, at process 1's start;
// entries created later are not granted.
func carve(read, hide []string) (out, list []string) {
	for _, r := range read {
		out, list = carveOne(r, hide, out, list)
	}
	return out, list
}

func carveOne(r string, hide []string, out, list []string) ([]string, []string) {
	var below []string
	for _, h := range hide {
		if h == r {
			return out, list // hidden whole
		}
		if within(h, r) {
			below = append(below, h)
		}
	}
	if len(below) == 0 {
		return append(out, r), list
	}
	entries, err := os.ReadDir(r)
	if err != nil {
		return out, list
	}
	list = append(list, r)
	for _, e := range entries {
		out, list = carveOne(filepath.Join(r, e.Name()), below, out, list)
	}
	return out, list
}

// within reports whether p lies strictly below dir.
func within(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// confineArgv is how process 1 starts argv at path through the trampoline.
func confineArgv(self string, c Confine, path string, argv []string) []string {
	rules, _ := json.Marshal(c)
	return append([]string{self, "internal", ConfineArg, string(rules), path}, argv...)
}

// ConfineMain is `internal confine`. It returns only on failure, with the status a
// command that could not start gets: the command never runs unconfined.
func ConfineMain(args []string) int {
	// Not dumpable until it execs: no other command can read what it holds.
	_ = linux.SetDumpable(false)
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "cordon: internal confine: for cordon's own use only")
		return ExitNotExecutable
	}
	var c Confine
	if err := json.Unmarshal([]byte(args[0]), &c); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal confine: %v\n", err)
		return ExitNotExecutable
	}
	path, argv := args[1], args[2:]
	if err := confine(c); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", argv[0], err)
		return ExitSelfCheck
	}
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", argv[0], err)
	if errors.Is(err, syscall.ENOENT) {
		return ExitNotFound
	}
	return ExitNotExecutable
}

// confine joins the cgroup (when asked), closes every inherited descriptor but stdio,
// and applies Landlock and seccomp, in that order: the filter comes last because it
// refuses what the steps before it need.
func confine(c Confine) error {
	runtime.LockOSThread()
	if c.Join {
		fd, err := syscall.Openat(joinFD, "cgroup.procs", syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err == nil {
			_, err = syscall.Write(fd, []byte("0")) // "0": the writing process
			syscall.Close(fd)
		}
		if err != nil {
			return fmt.Errorf("joining the command's cgroup: %w", err)
		}
	}
	if err := linux.CloseFrom(3); err != nil {
		return fmt.Errorf("closing inherited descriptors: %w", err)
	}
	if c.Landlock {
		if err := linux.Landlock(c.rules()); err != nil {
			return err
		}
	}
	arch, err := seccomp.Native()
	var prog []bpf.RawInstruction
	if err == nil {
		prog, err = seccomp.Program(arch)
	}
	if err == nil {
		err = linux.LoadSeccomp(prog)
	}
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
