//go:build unix

package gitread

import "syscall"

// oNonblock makes opening a FIFO planted in place of a file return at once.
const oNonblock = syscall.O_NONBLOCK
