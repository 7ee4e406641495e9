package supervise

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
)

// A request line is read whole up to maxRequest, and refused past it without the
// supervisor holding more than that of it.
func TestReadRequestIsBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
		ok   bool
	}{{"small", 100, true}, {"at the bound", maxRequest, true}, {"past it", maxRequest + 1, false}} {
		t.Run(c.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer server.Close()
			line := append(bytes.Repeat([]byte("x"), c.size-1), '\n')
			go func() {
				_, _ = client.Write(line)
				client.Close()
			}()
			got, err := readRequest(server, bufio.NewReader(server))
			if c.ok && (err != nil || len(got) != c.size) {
				t.Fatalf("got %d bytes, %v; want the %d-byte line", len(got), err, c.size)
			}
			if !c.ok && (err == nil || !strings.Contains(err.Error(), "request line of more than")) {
				t.Fatalf("got %d bytes, %v; want it refused", len(got), err)
			}
		})
	}
}
