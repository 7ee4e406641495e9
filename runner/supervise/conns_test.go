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

// Stdin arrives as Input lines: each is at most maxRequest bytes, and a last line
// without its newline still counts.
func TestReadInputLines(t *testing.T) {
	var got bytes.Buffer
	in := `{"data":"aGVsbG8g"}` + "\n" + `{"data":"d29ybGQ=","eof":true}`
	if err := readInput(bufio.NewReader(strings.NewReader(in)), &got); err != nil || got.String() != "hello world" {
		t.Errorf("got %q, %v", got.String(), err)
	}
	long := `{"data":"` + strings.Repeat("A", maxRequest) + `"}` + "\n"
	if err := readInput(bufio.NewReader(strings.NewReader(long)), &got); err == nil {
		t.Error("a stdin line past maxRequest was taken")
	}
}
