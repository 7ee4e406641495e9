package uids

import (
	"os"
	"strconv"
	"strings"
)

// uidBusy reports whether a process on the host runs with uid as its real, effective,
// saved or file-system uid (the Uid line of /proc/PID/status; the host's /proc shows
// every process, those in other pid and user namespaces included, with its host uid).
// A /proc it cannot read counts as busy: a lease is then not taken back.
func uidBusy(uid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := strconv.Itoa(uid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone since the listing
		}
		s := string(data)
		i := strings.Index(s, "\nUid:")
		if i < 0 {
			continue
		}
		line, _, _ := strings.Cut(s[i+len("\nUid:"):], "\n")
		for _, f := range strings.Fields(line) {
			if f == want {
				return true
			}
		}
	}
	return false
}
