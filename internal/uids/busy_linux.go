package uids

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cordonhq/cordon/internal/linux"
)

// uidBusy reports whether a process on the host runs with uid as any of its uids or
// gids ([idsInUse]; the host's /proc shows every process, those in other pid and user
// namespaces included, with its host ids). A /proc it cannot read counts as busy: a
// lease is then not taken back.
func uidBusy(uid int) bool {
	used, err := idsInUse(Range{Base: uid, Count: 1})
	return err != nil || used[uid]
}

// idsInUse lists the ids of r that a process on the host runs with, as any of its
// uids or gids (the Uid and Gid lines of /proc/PID/status), in one pass over /proc. A
// sandbox's gid is its uid, so either makes the id another's: a host process running
// as it (an account served by NSS rather than /etc, a pod's runAsUser, a private
// user range nobody listed) could read, signal and trace the sandbox.
//
// It runs on every lease, so it asks the kernel for each process's ids through a
// pidfd ([linux.PidCreds], Linux 6.13 on), which is cheaper than having it format the
// process's whole status; on an older kernel it reads each status with one read into
// one buffer ([linux.ReadProcFile]), and only the rare status longer than that
// (thousands of supplementary groups) whole. A status it cannot read is skipped only when the
// process is gone: otherwise the scan fails, and no uid is leased on a guess.
func idsInUse(r Range) (map[int]bool, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing the host's processes, to lease no uid that one runs as: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("listing the host's processes, to lease no uid that one runs as: %w", err)
	}
	used := map[int]bool{}
	buf := make([]byte, 16<<10)
	pidfds := true // the kernel tells a process's ids through its pidfd (linux.PidCreds)
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if pidfds {
			pid, err := strconv.Atoi(name)
			if err != nil {
				continue // not a process
			}
			ids, err := linux.PidCreds(pid)
			switch {
			case err == nil:
				for _, id := range ids {
					if r.Contains(int(id)) {
						used[int(id)] = true
					}
				}
				continue
			case errors.Is(err, os.ErrProcessDone):
				continue // gone since the listing
			case errors.Is(err, linux.ErrNoPidCreds):
				pidfds = false // an older kernel: every status is read
			}
			// Any other failure: its status says, or the scan fails below.
		}
		data, err := linux.ReadProcFile("/proc/"+name+"/status", buf)
		if errors.Is(err, linux.ErrProcFileLong) {
			data, err = os.ReadFile("/proc/" + name + "/status") // a long Groups line
		}
		if err != nil {
			if _, serr := os.Lstat("/proc/" + name); serr != nil {
				continue // gone since the listing
			}
			return nil, fmt.Errorf("reading the ids of host process %s, to lease no uid that one runs as: %w", name, err)
		}
		for _, key := range [][]byte{[]byte("\nUid:"), []byte("\nGid:")} {
			i := bytes.Index(data, key)
			if i < 0 {
				continue
			}
			line := data[i+len(key):]
			if j := bytes.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			for _, f := range bytes.Fields(line) {
				if id, err := strconv.Atoi(string(f)); err == nil && r.Contains(id) {
					used[id] = true
				}
			}
		}
	}
	return used, nil
}
