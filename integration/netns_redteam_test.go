package integration

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// The sandbox's network namespace is its own and it cannot reconfigure it: no
// interface can be added, loopback cannot be taken down or given another address, and
// a host process's abstract unix socket (which lives in the host's namespace) is not
// reachable. As root the namespace is made by cordon beforehand and belongs to the
// host's user namespace, where the sandbox holds no capability.
func TestRedSandboxCannotReconfigureItsNetwork(t *testing.T) {
	w := newWorld(t)
	_, err := exec.LookPath("ip")
	testutil.Require(t, err == nil, "ip (iproute2) is needed for the attempts")
	name := "cordon-red-netns-" + strings.ReplaceAll(t.Name(), "/", "-")
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	r := w.sh("ip link add red0 type dummy 2>/dev/null; echo add=$?; " +
		"ip link set lo down 2>/dev/null; echo down=$?; " +
		"ip addr add 10.9.9.9/8 dev lo 2>/dev/null; echo addr=$?; " +
		"unshare -rn true 2>/dev/null; echo unshare=$?; " +
		"python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0" + name + "\")' 2>/dev/null; echo abstract=$?; " +
		"echo ifs: $(tail -n +3 /proc/net/dev | cut -d: -f1); ip -o addr show dev lo | awk '{print \"lo\", $4}'")
	if r.code != 0 {
		t.Fatalf("the run failed: %v", r)
	}
	for _, want := range []string{"add=2", "down=2", "addr=2", "abstract=1", "ifs: lo\n", "lo 127.0.0.1/8\n"} {
		assertContains(t, "stdout", r.stdout, want)
	}
	if strings.Contains(r.stdout, "unshare=0") || strings.Contains(r.stdout, "10.9.9.9") {
		t.Fatalf("the sandbox changed its network: %q", r.stdout)
	}
	select {
	case <-accepted:
		t.Fatal("the host's abstract socket accepted a connection from the sandbox")
	default:
	}
}
