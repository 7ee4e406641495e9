package runner

import (
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// peerCommand names the session command a process connected on c belongs to: the
// kernel gives the peer's pid (SO_PEERCRED, in cordon's pid namespace), and the pid's
// cgroup v2 path ends in cmd-ID when it runs in a command's own cgroup. "" when that
// cannot be told (no command cgroups, the process is gone).
func peerCommand(c net.Conn) string {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ""
	}
	pid, err := linux.PeerPID(uc)
	if err != nil || pid <= 0 {
		return ""
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			last := path[strings.LastIndexByte(path, '/')+1:]
			if id, ok := strings.CutPrefix(last, "cmd-"); ok {
				return id
			}
		}
	}
	return ""
}
