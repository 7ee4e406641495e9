package runner

import (
	"fmt"
	"net"
	"net/netip"
	"os"

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
	if err := linux.CheckSandboxListener(f, want); err != nil {
		return nil, err
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("serving it: %w", err)
	}
	return ln, nil
}
