package linux

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerUID is the effective uid of the process at the other end of the unix socket c,
// as the kernel recorded it when the connection was made (LOCAL_PEERCRED).
func PeerUID(c syscall.Conn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Xucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	})
	if cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, err
	}
	return int(cred.Uid), nil
}

// SeqpacketPair is unsupported on macOS, which has no SOCK_SEQPACKET for unix sockets.
func SeqpacketPair() (*net.UnixConn, *net.UnixConn, error) {
	return nil, nil, errors.ErrUnsupported
}

// StreamPair is unsupported on macOS here: nothing there relays a Pod's egress.
func StreamPair() (*net.UnixConn, *net.UnixConn, error) {
	return nil, nil, errors.ErrUnsupported
}
