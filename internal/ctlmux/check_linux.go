package ctlmux

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// checkListener fails unless f is a listening TCP socket on exactly [ProxyAddr] in a
// network namespace other than the caller's.
func checkListener(f *os.File) error {
	s, err := linux.SocketOf(f)
	if err != nil {
		return fmt.Errorf("not a socket: %w", err)
	}
	var errs []string
	if s.Domain != linux.AFInet || s.Type != linux.SockStream || s.Protocol != linux.IPProtoTCP {
		errs = append(errs, fmt.Sprintf("socket %d/%d/%d, not TCP over IPv4", s.Domain, s.Type, s.Protocol))
	}
	if !s.Listening {
		errs = append(errs, "not listening")
	}
	if want := netip.MustParseAddrPort(ProxyAddr); s.Addr != want {
		errs = append(errs, fmt.Sprintf("bound to %v, not %v", s.Addr, want))
	}
	own, err := linux.InOwnNetns(f)
	switch {
	case err != nil:
		errs = append(errs, fmt.Sprintf("its network namespace cannot be told: %v", err))
	case own:
		errs = append(errs, "it is in the Pod's own network namespace, not the commands'")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
