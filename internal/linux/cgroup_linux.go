package linux

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroup is a cgroup v2 directory that cordon created for one run, plus the cgroup v1
// directories it uses for limits on hybrid hosts whose v2 hierarchy has no controllers.
// A Cgroup is not safe for concurrent use except Kill, which may be called at any time.
type Cgroup struct {
	Path string   // the v2 directory
	ID   uint64   // the v2 cgroup id (its inode number), as BPF programs see it
	v1   []string // v1 directories holding limits, whose members must be added by AddV1
	dir  *os.File // open v2 directory, for CLONE_INTO_CGROUP
	// home is, for each of v1, the cgroup of its hierarchy cordon itself is in (where
	// JoinV1's thread returns), and rel that directory as /proc/PID/cgroup names it;
	// both nil when unknown.
	home, rel []string
	ctrl      []string // the controller each of v1 is for
}

// Limits are resource limits; zero fields are unlimited.
type Limits struct {
	Memory int64   // bytes
	Pids   int64   // tasks
	CPU    float64 // CPUs
}

// ErrNoCgroup means no writable cgroup v2 hierarchy was found.
var ErrNoCgroup = errors.New("no writable cgroup v2 hierarchy")

// CgroupMounts returns the cgroup v2 mount point ("" if none) and the v1 mount point of
// each v1 controller, read from /proc/self/mountinfo.
func CgroupMounts() (v2 string, v1 map[string]string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", nil, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	v1 = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m, ok := parseMountinfo(sc.Text())
		if !ok {
			continue
		}
		switch m.FSType {
		case "cgroup2":
			if v2 == "" {
				v2 = m.Point
			}
		case "cgroup":
			for _, opt := range strings.Split(m.Super, ",") {
				switch opt {
				case "memory", "pids", "cpu":
					v1[opt] = m.Point
				}
			}
		}
	}
	return v2, v1, sc.Err()
}

// NewCgroup creates <v2 mount>/cordon/<name> and applies limits, in the v2 directory
// when its controllers are available and in v1 hierarchies otherwise.
func NewCgroup(name string, lim Limits) (*Cgroup, error) {
	v2, v1, err := CgroupMounts()
	if err != nil {
		return nil, err
	}
	if v2 == "" {
		return nil, ErrNoCgroup
	}
	parent := filepath.Join(v2, "cordon")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	cg := &Cgroup{Path: filepath.Join(parent, name)}
	if err := os.Mkdir(cg.Path, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroup, err)
	}
	if err := cg.setup(parent, v1, lim); err != nil {
		cg.Remove()
		return nil, err
	}
	return cg, nil
}

func (cg *Cgroup) setup(parent string, v1 map[string]string, lim Limits) error {
	var st unix.Stat_t
	if err := unix.Stat(cg.Path, &st); err != nil {
		return fmt.Errorf("stat cgroup: %w", err)
	}
	cg.ID = st.Ino
	dir, err := os.Open(cg.Path)
	if err != nil {
		return fmt.Errorf("opening cgroup: %w", err)
	}
	cg.dir = dir
	if lim == (Limits{}) {
		return nil // a command's cgroup in a session: nothing to set, nothing to read
	}
	avail := controllers(parent)
	type knob struct {
		ctrl, v2file, v2val, v1file, v1val string
	}
	var knobs []knob
	if lim.Memory > 0 {
		v := strconv.FormatInt(lim.Memory, 10)
		knobs = append(knobs, knob{"memory", "memory.max", v, "memory.limit_in_bytes", v})
		knobs = append(knobs, knob{"memory", "memory.swap.max", "0", "", ""})
	}
	if lim.Pids > 0 {
		v := strconv.FormatInt(lim.Pids, 10)
		knobs = append(knobs, knob{"pids", "pids.max", v, "pids.max", v})
	}
	if lim.CPU > 0 {
		const period = 100000
		quota := strconv.FormatInt(int64(lim.CPU*period), 10)
		knobs = append(knobs, knob{"cpu", "cpu.max", quota + " " + strconv.Itoa(period), "cpu.cfs_quota_us", quota})
	}
	for _, k := range knobs {
		if avail[k.ctrl] {
			if err := enableController(parent, k.ctrl); err != nil {
				return err
			}
			if err := writeFile(filepath.Join(cg.Path, k.v2file), k.v2val); err != nil && k.v2file != "memory.swap.max" {
				return fmt.Errorf("setting %s: %w", k.v2file, err)
			}
			continue
		}
		if k.v1file == "" {
			continue
		}
		root, ok := v1[k.ctrl]
		if !ok {
			return fmt.Errorf("limits: no %s controller in cgroup v2 or v1; cannot enforce the %s limit", k.ctrl, k.ctrl)
		}
		d := filepath.Join(root, "cordon", filepath.Base(cg.Path))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s cgroup: %w", k.ctrl, err)
		}
		if !contains(cg.v1, d) {
			cg.v1 = append(cg.v1, d)
			cg.ctrl = append(cg.ctrl, k.ctrl)
		}
		if err := writeFile(filepath.Join(d, k.v1file), k.v1val); err != nil {
			return fmt.Errorf("setting %s: %w", k.v1file, err)
		}
	}
	cg.findHome(v1)
	return nil
}

// findHome fills home and rel from the hierarchies' mount points (ctrl to mount) and
// /proc/self/cgroup; it leaves both nil when a hierarchy's mount is not its root (a
// container's view of a part of it), where the paths would not join up.
func (cg *Cgroup) findHome(mounts map[string]string) {
	if len(cg.v1) == 0 {
		return
	}
	own, err := procCgroups("self")
	if err != nil {
		return
	}
	var home, rel []string
	for i, d := range cg.v1 {
		root := mounts[cg.ctrl[i]]
		p, ok := own[cg.ctrl[i]]
		r, err := filepath.Rel(root, d)
		if !ok || err != nil || strings.HasPrefix(r, "..") {
			return
		}
		h := filepath.Join(root, p)
		if _, err := os.Stat(filepath.Join(h, "tasks")); err != nil {
			return
		}
		home, rel = append(home, h), append(rel, "/"+r)
	}
	cg.home, cg.rel = home, rel
}

// procCgroups reads /proc/<pid>/cgroup ("self", "thread-self" or a pid): each v1
// controller's cgroup path.
func procCgroups(pid string) (map[string]string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func controllers(dir string) map[string]bool {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	out := map[string]bool{}
	for _, c := range strings.Fields(string(data)) {
		out[c] = true
	}
	return out
}

func enableController(parent, ctrl string) error {
	if controllers(parent)[ctrl] {
		sub, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		if strings.Contains(" "+string(sub)+" ", " "+ctrl+" ") {
			return nil
		}
	}
	// The parent's parent must delegate it to "cordon" first.
	if err := writeFile(filepath.Join(filepath.Dir(parent), "cgroup.subtree_control"), "+"+ctrl); err != nil {
		return fmt.Errorf("enabling %s controller: %w", ctrl, err)
	}
	if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+"+ctrl); err != nil {
		return fmt.Errorf("enabling %s controller: %w", ctrl, err)
	}
	return nil
}

// FD returns the open v2 directory for syscall.SysProcAttr.CgroupFD, so that a child
// starts inside the cgroup (clone3 CLONE_INTO_CGROUP) with no window outside it.
func (cg *Cgroup) FD() int { return int(cg.dir.Fd()) }

// NeedsV1 reports whether processes must also be added to v1 limit cgroups by AddV1.
func (cg *Cgroup) NeedsV1() bool { return len(cg.v1) > 0 }

// AddV1 moves the given processes into the v1 limit cgroups, each one that is not in
// all of them already (forked by a thread that had joined them: JoinV1). Call it
// before they fork.
func (cg *Cgroup) AddV1(pids ...int) error {
	for _, pid := range pids {
		if cg.inV1(pid) {
			continue
		}
		for _, d := range cg.v1 {
			if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
				return fmt.Errorf("joining %s: %w", d, err)
			}
		}
	}
	return nil
}

// inV1 reports whether every thread of process pid is in all of the v1 limit cgroups
// (false when that cannot be told).
func (cg *Cgroup) inV1(pid int) bool {
	if len(cg.rel) != len(cg.v1) {
		return false
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		in, err := procCgroups(strconv.Itoa(pid) + "/task/" + t.Name())
		if err != nil {
			return false
		}
		for i, c := range cg.ctrl {
			if in[c] != cg.rel[i] {
				return false
			}
		}
	}
	return true
}

// JoinV1 moves the calling thread, which must be an OS thread of its own (OnOwnThread),
// into the v1 limit cgroups, so that a process it forks starts in them; leave moves it
// back to the v1 cgroups cordon is in, and must be called before the thread does
// anything else. A thread that moves itself (it writes 0 to tasks) does not take the
// kernel's global lock for cgroup moves (cgroup_threadgroup_rwsem), whose first taking
// after a quiet spell waits for a grace period of RCU (4-12 ms on the 2-core VM of the
// benchmarks), as AddV1's moves of other processes do. On failure the thread is where
// it was.
func (cg *Cgroup) JoinV1() (leave func() error, err error) {
	if len(cg.home) != len(cg.v1) {
		return nil, errors.New("cordon's own v1 cgroups are not known")
	}
	back := func(n int) error {
		var errs []error
		for _, h := range cg.home[:n] {
			if err := writeFile(filepath.Join(h, "tasks"), "0"); err != nil {
				errs = append(errs, fmt.Errorf("returning to %s: %w", h, err))
			}
		}
		return errors.Join(errs...)
	}
	for i, d := range cg.v1 {
		if err := writeFile(filepath.Join(d, "tasks"), "0"); err != nil {
			return nil, errors.Join(fmt.Errorf("joining %s: %w", d, err), back(i))
		}
	}
	return func() error { return back(len(cg.v1)) }, nil
}

// Kill kills every process in the cgroup and in the cgroups below it, and waits up to
// timeout until none is left (the cgroup reports itself unpopulated, so that it can be
// removed). It is cordon's one way to kill a cgroup, and the cgroup stays usable: a
// process cloned into it afterwards (CLONE_INTO_CGROUP, a session's next command) runs.
//
// It freezes the subtree (cgroup.freeze, Linux 5.2+), so that nothing in it forks past
// the kill, SIGKILLs every member of every cgroup in it, again on each pass until none
// is left (a child forked while its parent was being killed is caught on the next one),
// and thaws the subtree before it returns. It does not write cgroup.kill: on some
// kernels (seen on 6.18) a process later cloned into a cgroup killed that way is killed
// at birth (TestCgroupUsableAfterKill). Without a freezer (older kernels) the passes
// alone do the work.
func (cg *Cgroup) Kill(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if self := os.Getpid(); slices.Contains(cg.subtreeProcs(), self) {
		// A cgroup cordon itself is in is not a sandbox's: freezing and killing it
		// would take cordon and whatever runs beside it (a CI job, a shell) with it.
		return fmt.Errorf("cgroup %s holds cordon itself (pid %d): not killing it", cg.Path, self)
	}
	freeze := filepath.Join(cg.Path, "cgroup.freeze")
	if writeFile(freeze, "1") == nil {
		defer func() { _ = writeFile(freeze, "0") }()
	}
	for {
		pids := cg.subtreeProcs()
		// Empty cgroup.procs is not yet gone: a killed process may still be exiting,
		// and rmdir fails (EBUSY) until the cgroup reports itself unpopulated.
		if len(pids) == 0 && !cg.populated() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still has processes after kill", cg.Path)
		}
		for _, pid := range pids {
			_ = Kill(pid, unix.SIGKILL) // 0 (a process outside our pid namespace) is refused
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// subtreeProcs lists the processes in the cgroup and in every cgroup below it.
func (cg *Cgroup) subtreeProcs() []int {
	var pids []int
	_ = filepath.WalkDir(cg.Path, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			pids = append(pids, readProcs(path)...)
		}
		return nil // a cgroup removed meanwhile has nothing left to kill
	})
	return pids
}

// populated reports whether the cgroup or one below it still holds a process.
func (cg *Cgroup) populated() bool {
	data, err := os.ReadFile(filepath.Join(cg.Path, "cgroup.events"))
	return err == nil && eventCount(string(data), "populated") != 0
}

// Procs lists the processes in the v2 cgroup.
func (cg *Cgroup) Procs() []int { return readProcs(cg.Path) }

// readProcs lists the processes in the v2 cgroup directory dir.
func readProcs(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		// A process outside the reader's pid namespace is listed as 0: it cannot be
		// named, so it is left out, and never becomes kill(0).
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			pids = append(pids, n)
		}
	}
	return pids
}

// OOMKilled reports whether the memory limit killed a process of this cgroup.
func (cg *Cgroup) OOMKilled() bool {
	if data, err := os.ReadFile(filepath.Join(cg.Path, "memory.events")); err == nil {
		return eventCount(string(data), "oom_kill") > 0
	}
	for _, d := range cg.v1 {
		if data, err := os.ReadFile(filepath.Join(d, "memory.oom_control")); err == nil {
			return eventCount(string(data), "oom_kill") > 0
		}
	}
	return false
}

func eventCount(data, key string) int64 {
	for _, line := range strings.Split(data, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// Child creates the v2 cgroup name below cg (a session's command: it shares cg's
// limits, and can be killed and watched on its own) and opens it for
// CLONE_INTO_CGROUP. owner, when not -1, is given its cgroup.procs, which a process
// of that uid must be able to write to clone into it.
func (cg *Cgroup) Child(name string, owner int) (*Cgroup, error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return nil, fmt.Errorf("creating cgroup: %q is not a name for a cgroup below %s", name, cg.Path)
	}
	c := &Cgroup{Path: filepath.Join(cg.Path, name)}
	if err := os.Mkdir(c.Path, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup: %w", err)
	}
	if err := c.setup(cg.Path, nil, Limits{}); err != nil {
		c.Remove()
		return nil, err
	}
	if owner != -1 {
		if err := os.Chown(filepath.Join(c.Path, "cgroup.procs"), owner, -1); err != nil {
			c.Remove()
			return nil, fmt.Errorf("handing the cgroup to uid %d: %w", owner, err)
		}
	}
	return c, nil
}

// OpenCgroup opens an existing v2 cgroup directory (an engine's container), for
// Child and Kill; Remove removes only what cordon created below it.
func OpenCgroup(path string) (*Cgroup, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("stat cgroup: %w", err)
	}
	return &Cgroup{Path: path, ID: st.Ino}, nil
}

// Dir is the open cgroup directory, whose descriptor CLONE_INTO_CGROUP takes.
func (cg *Cgroup) Dir() *os.File { return cg.dir }

// Remove kills what is left and removes the directories, those of cgroups below it
// first. It is idempotent.
func (cg *Cgroup) Remove() error {
	if cg == nil {
		return nil
	}
	if cg.dir != nil {
		cg.dir.Close()
		cg.dir = nil
	}
	var errs []error
	if _, err := os.Stat(cg.Path); err == nil {
		if err := cg.Kill(5 * time.Second); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, removeChildren(cg.Path))
		if err := os.Remove(cg.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
		}
	}
	for _, d := range cg.v1 {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeChildren removes the (empty: killed) cgroup directories below dir, deepest
// first.
func removeChildren(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		errs = append(errs, removeChildren(sub))
		if err := os.Remove(sub); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Delegate hands the cgroup's cgroup.procs to uid. Under cgroup v2's delegation rule
// a process may move one between two cgroups only if it can write the cgroup.procs
// of their common ancestor: process 1 of a sandbox running as uid can then clone its
// commands into the cgroups below this one (each handed to it by [Cgroup.Child]).
func (cg *Cgroup) Delegate(uid int) error {
	if err := os.Chown(filepath.Join(cg.Path, "cgroup.procs"), uid, -1); err != nil {
		return fmt.Errorf("delegating cgroup %s to uid %d: %w", cg.Path, uid, err)
	}
	return nil
}
