package linux

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Socket is what the kernel says of a socket descriptor: nothing a process wrote.
type Socket struct {
	Domain, Type, Protocol int
	Listening              bool           // SO_ACCEPTCONN: listen(2) was called on it
	Addr                   netip.AddrPort // its bound address, for AF_INET and AF_INET6
	Path                   string         // its bound path, for AF_UNIX ("" when unbound or abstract)
}

// SocketOf describes the socket f (SO_DOMAIN, SO_TYPE, SO_PROTOCOL, SO_ACCEPTCONN and
// getsockname); an error when f is not a socket.
func SocketOf(f *os.File) (Socket, error) {
	var s Socket
	err := control(f, func(fd int) error {
		var err error
		if s.Domain, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil {
			return fmt.Errorf("SO_DOMAIN: %w", err)
		}
		if s.Type, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil {
			return fmt.Errorf("SO_TYPE: %w", err)
		}
		if s.Protocol, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil {
			return fmt.Errorf("SO_PROTOCOL: %w", err)
		}
		acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		if err != nil {
			return fmt.Errorf("SO_ACCEPTCONN: %w", err)
		}
		s.Listening = acc != 0
		sa, err := unix.Getsockname(fd)
		if err != nil {
			return fmt.Errorf("getsockname: %w", err)
		}
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			s.Addr = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
		case *unix.SockaddrInet6:
			s.Addr = netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
		case *unix.SockaddrUnix:
			if !strings.HasPrefix(a.Name, "@") && a.Name != "" {
				s.Path = a.Name
			}
		}
		return nil
	})
	return s, err
}

// InOwnNetns reports whether the socket f belongs to the caller's network namespace.
// It asks the kernel for the socket's namespace (SIOCGSKNS, which needs CAP_NET_ADMIN
// over the namespace's user namespace) and compares it with /proc/self/ns/net by device
// and inode; where that is refused (EPERM: a namespace a container engine made, cordon
// unprivileged) it compares the namespaces' cookies instead (SO_NETNS_COOKIE, Linux
// 5.14), against a socket made here. With neither it fails: nothing is assumed.
func InOwnNetns(f *os.File) (bool, error) {
	var ns int
	err := control(f, func(fd int) error {
		var err error
		ns, err = unix.IoctlRetInt(fd, unix.SIOCGSKNS)
		return err
	})
	if err == nil {
		defer unix.Close(ns)
		var theirs, ours unix.Stat_t
		if err := unix.Fstat(ns, &theirs); err != nil {
			return false, fmt.Errorf("the socket's network namespace: %w", err)
		}
		if err := unix.Stat("/proc/self/ns/net", &ours); err != nil {
			return false, fmt.Errorf("cordon's network namespace: %w", err)
		}
		return theirs.Dev == ours.Dev && theirs.Ino == ours.Ino, nil
	}
	if !errors.Is(err, unix.EPERM) {
		return false, fmt.Errorf("SIOCGSKNS: %w", err)
	}
	var theirs uint64
	if err := control(f, func(fd int) error {
		var cerr error
		theirs, cerr = netnsCookie(fd)
		return cerr
	}); err != nil {
		return false, fmt.Errorf("SIOCGSKNS refused, and SO_NETNS_COOKIE: %w", err)
	}
	own, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("a socket in cordon's network namespace: %w", err)
	}
	defer unix.Close(own)
	ours, err := netnsCookie(own)
	if err != nil {
		return false, fmt.Errorf("SO_NETNS_COOKIE: %w", err)
	}
	return theirs == ours, nil
}

// netnsCookie is the cookie of the network namespace of socket fd.
func netnsCookie(fd int) (uint64, error) {
	v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, err
	}
	return v, nil
}

// control runs fn on f's descriptor, keeping f alive meanwhile.
func control(f *os.File, fn func(fd int) error) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// Socket types and protocols, for checks of [Socket] outside this package.
const (
	AFInet     = unix.AF_INET
	AFUnix     = unix.AF_UNIX
	SockStream = unix.SOCK_STREAM
	IPProtoTCP = unix.IPPROTO_TCP
)

// CheckSandboxListener fails unless f is what a sandbox's process 1 is meant to hand
// over as its egress listener: a TCP listener (AF_INET, SOCK_STREAM, IPPROTO_TCP,
// listening) bound to want, in a network namespace other than this process's. f is
// hostile input; every failed check is reported.
func CheckSandboxListener(f *os.File, want netip.AddrPort) error {
	s, err := SocketOf(f)
	if err != nil {
		return fmt.Errorf("not a socket: %w", err)
	}
	var errs []string
	if s.Domain != AFInet {
		errs = append(errs, fmt.Sprintf("address family %d, not AF_INET", s.Domain))
	}
	if s.Type != SockStream {
		errs = append(errs, fmt.Sprintf("socket type %d, not SOCK_STREAM", s.Type))
	}
	if s.Protocol != IPProtoTCP {
		errs = append(errs, fmt.Sprintf("protocol %d, not TCP", s.Protocol))
	}
	if !s.Listening {
		errs = append(errs, "not listening")
	}
	if s.Addr != want {
		errs = append(errs, fmt.Sprintf("bound to %v, not %v", s.Addr, want))
	}
	own, err := InOwnNetns(f)
	switch {
	case err != nil:
		errs = append(errs, fmt.Sprintf("its network namespace cannot be told: %v", err))
	case own:
		errs = append(errs, "it is in cordon's own network namespace, not the sandbox's")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// CheckGateListener fails unless f is what a Pod's process 1 is meant to hand over as
// its gate listener: a unix stream socket (AF_UNIX, SOCK_STREAM, listening) bound to
// the path want. f is hostile input; every failed check is reported.
func CheckGateListener(f *os.File, want string) error {
	s, err := SocketOf(f)
	if err != nil {
		return fmt.Errorf("not a socket: %w", err)
	}
	var errs []string
	if s.Domain != AFUnix {
		errs = append(errs, fmt.Sprintf("address family %d, not AF_UNIX", s.Domain))
	}
	if s.Type != SockStream {
		errs = append(errs, fmt.Sprintf("socket type %d, not SOCK_STREAM", s.Type))
	}
	if !s.Listening {
		errs = append(errs, "not listening")
	}
	if s.Path != want {
		errs = append(errs, fmt.Sprintf("bound to %q, not %s", s.Path, want))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
