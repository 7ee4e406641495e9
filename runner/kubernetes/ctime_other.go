//go:build !linux

package kubernetes

import "syscall"

// ctimeOf is st's change time, in ns since the epoch.
func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
