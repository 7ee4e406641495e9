package uids

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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
func idsInUse(r Range) (map[int]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing the host's processes, to lease no uid that one runs as: %w", err)
	}
	used := map[int]bool{}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone since the listing
		}
		s := string(data)
		for _, key := range []string{"\nUid:", "\nGid:"} {
			i := strings.Index(s, key)
			if i < 0 {
				continue
			}
			line, _, _ := strings.Cut(s[i+len(key):], "\n")
			for _, f := range strings.Fields(line) {
				if id, err := strconv.Atoi(f); err == nil && r.Contains(id) {
					used[id] = true
				}
			}
		}
	}
	return used, nil
}
