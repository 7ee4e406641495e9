package runner

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// errPeerGone is peerCommand's answer when the process that connected has exited: the
// command it belonged to cannot be told, and no other may be credited with its
// request.
var errPeerGone = errors.New("the process that asked has exited; ask again from a running one")

// peerCommand names the session command a process connected on c belongs to: the
// kernel gives the peer's pid (SO_PEERCRED, in cordon's pid namespace), and the pid's
// cgroup v2 path ends in cmd-ID when it runs in a command's own cgroup. "" when that
// cannot be told (no command cgroups, a peer outside cordon's pid namespace or whose
// cgroup cordon may not read), and
// errPeerGone when the peer has exited: its pid may be another process's by then
// (with the peer's pidfd, SO_PEERPIDFD, that is told apart; without one, only a pid
// that is gone).
func peerCommand(c net.Conn) (string, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "", nil
	}
	p, err := linux.SocketPeer(uc)
	if err != nil || p.PID <= 0 {
		return "", nil
	}
	defer p.Close()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cgroup")
	if !p.Alive() {
		return "", errPeerGone // what was read, if anything, may be another process's
	}
	if err != nil {
		return "", nil // alive but not readable here (a /proc with hidepid)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			last := path[strings.LastIndexByte(path, '/')+1:]
			if id, ok := strings.CutPrefix(last, "cmd-"); ok {
				return id, nil
			}
		}
	}
	return "", nil
}
