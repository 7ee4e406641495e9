//go:build unix && !linux

package fsdiff

import "syscall"

// oNonblock makes opening a FIFO that replaced a regular file return at once (on
// Linux the walk opens files through internal/linux, with O_NONBLOCK).
const oNonblock = syscall.O_NONBLOCK
