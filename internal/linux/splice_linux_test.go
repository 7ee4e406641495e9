package linux

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// WidenSendBuffer gives a socket the whole of SpliceSendBuffer when wmem_max allows it,
// and otherwise leaves the socket's autotuned buffer alone.
func TestWidenSendBuffer(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	before, err := SendBuffer(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		t.Fatal(err)
	}
	max, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	widened := WidenSendBuffer(raw)
	after, err := SendBuffer(raw)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case widened != (max >= SpliceSendBuffer):
		t.Fatalf("WidenSendBuffer = %v with wmem_max %d; want %v", widened, max, !widened)
	case widened && after < 2*SpliceSendBuffer:
		t.Fatalf("send buffer %d after widening; want at least %d", after, 2*SpliceSendBuffer)
	case !widened && after != before:
		t.Fatalf("send buffer %d, was %d: changed although not widened", after, before)
	}
}
