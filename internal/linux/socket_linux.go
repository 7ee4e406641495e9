package linux

import (
	"errors"
	"net"
	"os"
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

// Peer is the process at the other end of a unix socket as the kernel recorded it
// when the connection was made: its pid in the caller's pid namespace (0 when it is
// outside it) and, where the kernel gives one (SO_PEERPIDFD, Linux 6.5), a pidfd of
// that very process. A pid alone may name another process by the time it is looked
// up: [Peer.Alive] after the lookup tells that the process looked at was the peer.
type Peer struct {
	PID   int
	pidfd int // -1 when the kernel gives none
}

// SocketPeer returns the peer of the unix socket c; Close releases it.
func SocketPeer(c syscall.Conn) (*Peer, error) {
	cred, err := peerCred(c)
	if err != nil {
		return nil, err
	}
	p := &Peer{PID: int(cred.Pid), pidfd: -1}
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	_ = raw.Control(func(fd uintptr) {
		if pfd, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			p.pidfd = pfd
		}
	})
	return p, nil
}

// Alive reports whether the peer process still runs: with a pidfd, that process and
// no other; without, whatever process has its pid. A process the caller may not
// signal (EPERM) runs.
func (p *Peer) Alive() bool {
	var err error
	switch {
	case p.pidfd >= 0:
		err = unix.PidfdSendSignal(p.pidfd, 0, nil, 0)
	case p.PID > 0:
		err = unix.Kill(p.PID, 0)
	default:
		return false
	}
	return err == nil || errors.Is(err, unix.EPERM)
}

// Close releases the peer's pidfd.
func (p *Peer) Close() {
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
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

// SeqpacketPair is a connected pair of unix SOCK_SEQPACKET sockets (close-on-exec):
// a control channel both of whose ends are in this process.
func SeqpacketPair() (*net.UnixConn, *net.UnixConn, error) {
	return socketPair(unix.SOCK_SEQPACKET, "seqpacket")
}

// StreamPair is a connected pair of unix SOCK_STREAM sockets (close-on-exec), both in
// this process: a byte stream with half-close (CloseRead, CloseWrite) for a relay.
func StreamPair() (*net.UnixConn, *net.UnixConn, error) {
	return socketPair(unix.SOCK_STREAM, "stream")
}

func socketPair(typ int, name string) (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), name)
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			if i == 1 {
				conns[0].Close()
			} else {
				unix.Close(fds[1])
			}
			return nil, nil, err
		}
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1], nil
}
