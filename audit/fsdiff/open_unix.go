//go:build unix

package fsdiff

import "syscall"

// oNonblock makes opening a FIFO that replaced a regular file return at once.
const oNonblock = syscall.O_NONBLOCK
