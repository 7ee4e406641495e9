package runner

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// egressListener checks f, the listening socket the sandbox's process 1 handed over, and
// returns it as a listener. f is hostile input: process 1 runs inside the sandbox. It
// must be what process 1 is meant to make: a TCP listener (AF_INET, SOCK_STREAM,
// IPPROTO_TCP, listening) bound to want, in a network namespace that is not cordon's
// own. A listener in cordon's namespace would let every process of the host use the
// run's allowlist and credentials. Every failed check is reported. f is closed either
// way; the listener returned holds a descriptor of its own.
func egressListener(f *os.File, want netip.AddrPort) (net.Listener, error) {
	defer f.Close()
	s, err := linux.SocketOf(f)
	if err != nil {
		return nil, fmt.Errorf("not a socket: %w", err)
	}
	var errs []string
	if s.Domain != linux.AFInet {
		errs = append(errs, fmt.Sprintf("address family %d, not AF_INET", s.Domain))
	}
	if s.Type != linux.SockStream {
		errs = append(errs, fmt.Sprintf("socket type %d, not SOCK_STREAM", s.Type))
	}
	if s.Protocol != linux.IPProtoTCP {
		errs = append(errs, fmt.Sprintf("protocol %d, not TCP", s.Protocol))
	}
	if !s.Listening {
		errs = append(errs, "not listening")
	}
	if s.Addr != want {
		errs = append(errs, fmt.Sprintf("bound to %v, not %v", s.Addr, want))
	}
	own, err := linux.InOwnNetns(f)
	switch {
	case err != nil:
		errs = append(errs, fmt.Sprintf("its network namespace cannot be told: %v", err))
	case own:
		errs = append(errs, "it is in cordon's own network namespace, not the sandbox's")
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("serving it: %w", err)
	}
	return ln, nil
}
