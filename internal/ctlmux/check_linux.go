package ctlmux

import (
	"net/netip"
	"os"

	"github.com/cordonhq/cordon/internal/linux"
)

// checkListener fails unless f is a listening TCP socket on exactly [ProxyAddr] in a
// network namespace other than the caller's: the checks the host makes of a local
// sandbox's listener (linux.CheckSandboxListener).
func checkListener(f *os.File) error {
	return linux.CheckSandboxListener(f, netip.MustParseAddrPort(ProxyAddr))
}
