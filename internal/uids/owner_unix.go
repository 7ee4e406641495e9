//go:build unix

package uids

import (
	"os"
	"syscall"
)

// ownedByMeOrRoot reports whether this user or root owns the file st describes.
func ownedByMeOrRoot(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && (int(s.Uid) == os.Geteuid() || s.Uid == 0)
}
