package linux

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerPID is the pid of the process at the other end of the unix socket c, as the
// kernel recorded it when the connection was made (SO_PEERCRED), in the caller's pid
// namespace: 0 when the peer is outside it.
func PeerPID(c syscall.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return 0, err
	}
	return int(cred.Pid), nil
}

// PeerUID is the effective uid of the process at the other end of the unix socket c,
// as the kernel recorded it when the connection was made or the listening socket was
// created (SO_PEERCRED), in the caller's user namespace.
func PeerUID(c syscall.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return 0, err
	}
	return int(cred.Uid), nil
}

// peerCred reads SO_PEERCRED of the unix socket c.
func peerCred(c syscall.Conn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil {
		return nil, cerr
	}
	return cred, err
}
