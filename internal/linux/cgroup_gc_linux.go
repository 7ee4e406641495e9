package linux

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// RemoveCgroup removes the cgroups NewCgroup created for name (v2 and v1), killing any
// process still inside. It is for cleaning up after a crashed run.
func RemoveCgroup(name string) error {
	v2, v1, err := CgroupMounts()
	if err != nil || v2 == "" {
		return err
	}
	cg := &Cgroup{Path: filepath.Join(v2, "cordon", name)}
	for _, root := range v1 {
		d := filepath.Join(root, "cordon", name)
		if _, err := os.Stat(d); err == nil && !contains(cg.v1, d) {
			cg.v1 = append(cg.v1, d)
		}
	}
	return cg.Remove()
}

// IdleCgroups lists the cgroups under <v2 mount>/cordon that belong to uid, hold no
// process, in them or below them, and were made (or last had a cgroup made below them)
// before the given time: what a run whose teardown could not remove its cgroup left
// behind (a process was still exiting), for gc. A newer idle cgroup may be a run's that
// is still starting: its sandbox has not entered it yet. On a hybrid host it also lists
// the names of such v1 limit cgroups (<v1 mount>/cordon/NAME) whose v2 cgroup is gone:
// a run killed before its teardown left both, and gc once removed only the v2 one.
func IdleCgroups(uid int, before time.Time) []string {
	v2, v1, err := CgroupMounts()
	if err != nil || v2 == "" {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range cordonCgroups(v2, uid, before) {
		seen[e] = true
		data, err := os.ReadFile(filepath.Join(v2, "cordon", e, "cgroup.events"))
		if err == nil && eventCount(string(data), "populated") == 0 {
			out = append(out, e)
		}
	}
	for _, root := range v1 {
		for _, e := range cordonCgroups(root, uid, before) {
			if seen[e] {
				continue
			}
			seen[e] = true
			if _, err := os.Lstat(filepath.Join(v2, "cordon", e)); errors.Is(err, fs.ErrNotExist) && v1Idle(filepath.Join(root, "cordon", e)) {
				out = append(out, e)
			}
		}
	}
	return out
}

// cordonCgroups lists the directories under <mount>/cordon owned by uid and last
// changed before the given time.
func cordonCgroups(mount string, uid int, before time.Time) []string {
	parent := filepath.Join(mount, "cordon")
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		var st unix.Stat_t
		dir := filepath.Join(parent, e.Name())
		if !e.IsDir() || unix.Lstat(dir, &st) != nil || int(st.Uid) != uid {
			continue
		}
		if changed := time.Unix(st.Ctim.Unix()); changed.Before(before) {
			out = append(out, e.Name())
		}
	}
	return out
}

// v1Idle reports whether the v1 cgroup dir and every cgroup below it hold no process
// (false when that cannot be read).
func v1Idle(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil || len(bytes.TrimSpace(data)) != 0 {
		return false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() && !v1Idle(filepath.Join(dir, e.Name())) {
			return false
		}
	}
	return true
}

// RemoveIdleCgroup removes the cgroup name under <v2 mount>/cordon, and the empty
// cgroups below it, if no process is in any of them; and the same name's v1 limit
// cgroups, each if no process is in it. It kills nothing.
func RemoveIdleCgroup(name string) error {
	v2, v1, err := CgroupMounts()
	if err != nil || v2 == "" {
		return err
	}
	if strings.ContainsRune(name, '/') || name == "" || name == "." || name == ".." {
		return fmt.Errorf("not a cgroup name: %q", name)
	}
	dir := filepath.Join(v2, "cordon", name)
	if data, err := os.ReadFile(filepath.Join(dir, "cgroup.events")); err == nil {
		if eventCount(string(data), "populated") != 0 {
			return fmt.Errorf("cgroup %s is not idle", dir)
		}
		if err := removeChildren(dir); err != nil {
			return err
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing cgroup: %w", err)
		}
	}
	var errs []error
	for _, root := range v1 {
		d := filepath.Join(root, "cordon", name)
		if _, err := os.Lstat(d); err != nil {
			continue
		}
		if !v1Idle(d) {
			errs = append(errs, fmt.Errorf("cgroup %s is not idle", d))
			continue
		}
		errs = append(errs, removeChildren(d))
		// rmdir of a v1 cgroup fails (EBUSY) if a process joined it since.
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}
