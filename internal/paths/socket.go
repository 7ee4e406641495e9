//go:build unix

package paths

import (
	"context"
	"net"

	"github.com/cordonhq/cordon/internal/linux"
)

// DialSocket connects to the unix socket at path and keeps the connection only when
// the process answering on it runs as uid or as root (SO_PEERCRED): whoever can place a
// socket where cordon looks (a directory another user made first, a path a flag named)
// must not receive what cordon sends nor answer for the process cordon meant to reach.
func DialSocket(ctx context.Context, path string, uid int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := CheckPeer(c, uid); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// CheckPeer refuses a unix connection c whose peer runs as neither uid nor root.
func CheckPeer(c net.Conn, uid int) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return unsafef("%s is not a unix socket", c.RemoteAddr())
	}
	got, err := linux.PeerUID(uc)
	if err != nil {
		return unsafef("the peer of %s: %v", uc.RemoteAddr(), err)
	}
	if got != uid && got != 0 {
		return unsafef("the socket %s is answered by uid %d, not by uid %d", uc.RemoteAddr(), got, uid)
	}
	return nil
}
