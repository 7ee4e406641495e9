package ctlmux

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/cordonhq/cordon/internal/linux"
)

// checkListener says which port f is process 1's listener for, or fails unless f is a
// listening TCP socket on exactly [ProxyAddr] in a network namespace other than the
// caller's (the checks the host makes of a local sandbox's listener,
// linux.CheckSandboxListener), or a listening unix stream socket on exactly
// [GateSocket].
func checkListener(f *os.File) (byte, error) {
	s, err := linux.SocketOf(f)
	if err != nil {
		return 0, fmt.Errorf("not a socket: %w", err)
	}
	if s.Domain == linux.AFUnix {
		return portGate, linux.CheckGateListener(f, GateSocket)
	}
	return portEgress, linux.CheckSandboxListener(f, netip.MustParseAddrPort(ProxyAddr))
}
