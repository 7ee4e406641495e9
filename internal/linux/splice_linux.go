package linux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// PipeSize is the buffer size [NewPipe] asks for: one splice moves at most this much.
const PipeSize = 1 << 20

// Pipe is a kernel pipe that carries bytes between two sockets with splice(2), so they
// never enter user memory. It holds no bytes between a [Pipe.Fill] and the [Pipe.Drain]
// that follows it unless Drain failed; a Pipe that failed must be closed, not reused.
// A Pipe is not safe for concurrent use.
type Pipe struct {
	r, w int
	held int // bytes in the pipe
}

// NewPipe returns a non-blocking pipe of up to [PipeSize] bytes (less when the pipe
// limits of /proc/sys/fs refuse more).
func NewPipe() (*Pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("creating splice pipe: %w", err)
	}
	_, _ = unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, PipeSize) // smaller works too
	return &Pipe{r: fds[0], w: fds[1]}, nil
}

// Close closes both ends of the pipe. It is idempotent.
func (p *Pipe) Close() error {
	if p.r < 0 {
		return nil
	}
	err := errors.Join(unix.Close(p.r), unix.Close(p.w))
	p.r, p.w = -1, -1
	return err
}

// Fill moves up to max bytes that src has received into the pipe, waiting through the
// Go poller (and so under src's read deadline) until there is at least one. It returns
// io.EOF when src's peer has finished sending and nothing was moved.
func (p *Pipe) Fill(src syscall.RawConn, max int) (int, error) {
	var n int64
	var serr error
	err := src.Read(func(fd uintptr) bool {
		for {
			n, serr = splice(int(fd), p.w, max)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return 0, fmt.Errorf("splice from socket: %w", err)
	}
	if n == 0 {
		return 0, io.EOF
	}
	p.held += int(n)
	return int(n), nil
}

// Drain moves every byte in the pipe to dst, waiting through the Go poller (and so
// under dst's write deadline) while dst's buffer is full.
func (p *Pipe) Drain(dst syscall.RawConn) error {
	var serr error
	err := dst.Write(func(fd uintptr) bool {
		for p.held > 0 {
			n, e := splice(p.r, int(fd), p.held)
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				return false
			case e != nil:
				serr = e
				return true
			case n == 0:
				serr = io.ErrShortWrite
				return true
			}
			p.held -= int(n)
		}
		return true
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("splice to socket: %w", err)
	}
	return nil
}

// splice moves up to n bytes from in to out without waiting for data or room: both are
// non-blocking (Go's sockets and [NewPipe]'s pipe) and SPLICE_F_NONBLOCK is set, so it is
// a raw system call. At most it waits for a socket's lock while the other direction of a
// tunnel splices on the same socket, which holds this goroutine's P as long (one splice,
// well under a millisecond). A Go system call (unix.Splice) would, whenever the process
// had been idle, wake the runtime's sysmon thread, which then polls every 20 µs for at
// least a millisecond: in a tunnel that goes idle between bursts that was up to a fifth of
// the proxy's CPU (perf, issue 39).
func splice(in, out, n int) (int64, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_SPLICE, uintptr(in), 0, uintptr(out), 0, uintptr(n),
		unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
	if e != 0 {
		return 0, e
	}
	return int64(r), nil
}

// SpliceSendBuffer is the send buffer [WidenSendBuffer] asks for on a socket that a
// splice writes to (the kernel doubles it for its own bookkeeping). Measured on loopback
// (scripts/bench-egress-ab.sh, 1.6 GB through the proxy), a send buffer past
// autotuning's usual ceiling (net.ipv4.tcp_wmem's 4 MiB) halves the drains that find
// the socket full and the proxy's waits in epoll, and cut its CPU per GB by 3-23 % in
// 9 of 9 A/B pairs, though not its throughput beyond the noise of a loaded 2-core
// machine; 1 MiB (2 MiB in effect) did not.
const SpliceSendBuffer = 4 << 20

// WidenSendBuffer sets c's SO_SNDBUF to [SpliceSendBuffer] when net.core.wmem_max lets it
// have the whole of it, and reports whether it did. Otherwise it leaves c alone: the kernel
// would clamp the request to wmem_max (212992 bytes by default), and setting SO_SNDBUF
// turns off the socket's send-buffer autotuning, which by itself grows past that.
func WidenSendBuffer(c syscall.RawConn) bool {
	if wmemMax() < SpliceSendBuffer {
		return false
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, SpliceSendBuffer)
	}); err != nil {
		return false
	}
	return serr == nil
}

// SendBuffer returns c's SO_SNDBUF as the kernel reports it (twice what was set).
func SendBuffer(c syscall.RawConn) (int, error) {
	var n int
	var serr error
	if err := c.Control(func(fd uintptr) {
		n, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	}); err != nil {
		return 0, err
	}
	return n, serr
}

// wmemMax is net.core.wmem_max, the largest SO_SNDBUF an unprivileged setsockopt gets,
// read once; 0 when it cannot be read.
var wmemMax = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
})
