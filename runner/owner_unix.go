//go:build unix

package runner

import (
	"io/fs"
	"syscall"
)

func sameOwner(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Uid == sb.Uid
}

// ownedBy reports whether id (a uid, and the gid of the same number) owns the file st
// describes, as its user or its group.
func ownedBy(st fs.FileInfo, id int) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && (int(s.Uid) == id || int(s.Gid) == id)
}
