package ctl

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// A hostile peer on a stream (on macOS, process 1 runs under the sandbox's profile and
// whatever the agent made of it): each attack writes raw bytes and descriptors, and the
// receiver must fail (or succeed) bounded, with every descriptor it received and did not
// hand over closed. A descriptor is checked closed by the pipe behind it: its read end
// reads EOF once the receiver's copy, the only one left, is closed.

// hostile sends data with n fresh pipe write ends attached, keeping our copies of them
// closed and returning the read ends.
func hostile(t *testing.T, c *Conn, data []byte, n int) []*os.File {
	t.Helper()
	var reads, writes []*os.File
	fds := make([]int, n)
	for i := range n {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		reads, writes = append(reads, r), append(writes, w)
		fds[i] = int(w.Fd())
	}
	var oob []byte
	if n > 0 {
		oob = linux.UnixRights(fds...)
	}
	if _, _, err := c.c.WriteMsgUnix(data, oob, nil); err != nil {
		t.Fatal(err)
	}
	CloseFiles(writes)
	t.Cleanup(func() { CloseFiles(reads) })
	return reads
}

// closedOnReceiver waits, with a deadline, for each pipe's last write end to close.
func closedOnReceiver(t *testing.T, what string, reads []*os.File) {
	t.Helper()
	for i, r := range reads {
		if err := r.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("%s: descriptor %d is still open on the receiver (read: %v); want it closed", what, i, err)
		}
	}
}

// recvBounded is b.Recv, failing the test if it does not return within the deadline.
func recvBounded(t *testing.T, b *Conn) (Msg, []*os.File, error) {
	t.Helper()
	type res struct {
		m     Msg
		files []*os.File
		err   error
	}
	ch := make(chan res, 1)
	go func() {
		m, f, err := b.Recv()
		ch <- res{m, f, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.files, r.err
	case <-time.After(20 * time.Second):
		b.Close()
		t.Fatal("Recv did not return")
		return Msg{}, nil, nil
	}
}

func body(t *testing.T) []byte {
	t.Helper()
	data, err := json.Marshal(Msg{Op: OpExec, ID: 7, Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestStreamHostileDescriptorFlood: a frame that announces the largest body and then
// trickles it one byte a write, each with MaxFiles descriptors, must not make the
// receiver hold more than MaxFiles of them: Recv fails as soon as it has more than a
// frame may carry (without waiting for the rest), and closes them all; the ones still
// queued go with the connection. (Broke before:
// the receiver kept every one until the frame ended, up to MaxMsg*MaxFiles.)
func TestStreamHostileDescriptorFlood(t *testing.T) {
	a, b := streamPair(t)
	var reads []*os.File
	reads = append(reads, hostile(t, a, frame(MaxMsg, MaxFiles), 0)...)
	for range 3 {
		reads = append(reads, hostile(t, a, []byte{'{'}, MaxFiles)...)
	}
	if _, files, err := recvBounded(t, b); err == nil {
		CloseFiles(files)
		t.Fatal("Recv of a frame with 3*MaxFiles descriptors succeeded")
	}
	b.Close() // as the caller does on an error: what the kernel still queues goes with it
	closedOnReceiver(t, "flood", reads)
}

// TestStreamHostileTruncated: a frame cut short by the peer hanging up fails Recv and
// closes the descriptors that came with its first bytes.
func TestStreamHostileTruncated(t *testing.T) {
	a, b := streamPair(t)
	data := append(frame(100, 1), []byte(`{"op":`)...)
	reads := hostile(t, a, data, 1)
	a.Close()
	if _, files, err := recvBounded(t, b); err == nil {
		CloseFiles(files)
		t.Fatal("Recv of a truncated frame succeeded")
	}
	closedOnReceiver(t, "truncated", reads)
}

// TestStreamHostileMiscounted: descriptors on a frame announcing none, and more
// descriptors than announced, fail that frame and are closed.
func TestStreamHostileMiscounted(t *testing.T) {
	for _, c := range []struct {
		name      string
		announced int
		sent      int
	}{{"descriptors without a count", 0, 1}, {"more than announced", 1, 2}, {"fewer than announced", 2, 1}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := streamPair(t)
			data := body(t)
			reads := hostile(t, a, append(frame(len(data), c.announced), data...), c.sent)
			if _, files, err := recvBounded(t, b); err == nil {
				CloseFiles(files)
				t.Fatal("Recv succeeded")
			}
			closedOnReceiver(t, c.name, reads)
		})
	}
}

// TestStreamHostileOversizedWithFiles: a header over MaxMsg (or MaxFiles) carrying
// descriptors is refused and its descriptors closed, without reading the body.
func TestStreamHostileOversizedWithFiles(t *testing.T) {
	for _, h := range [][]byte{frame(MaxMsg+1, 1), frame(10, MaxFiles+1), {0xff, 0xff, 0xff, 0xff, 1}} {
		a, b := streamPair(t)
		reads := hostile(t, a, h, 1)
		if _, _, err := recvBounded(t, b); !errors.Is(err, ErrTruncated) {
			t.Errorf("header %x: Recv: %v; want ErrTruncated", h, err)
		}
		closedOnReceiver(t, "oversized", reads)
	}
}

// TestStreamSplitFrame: a valid frame written a byte at a time, its descriptor with the
// first byte, arrives whole with its descriptor (held: the reader loops on the length).
func TestStreamSplitFrame(t *testing.T) {
	a, b := streamPair(t)
	data := body(t)
	whole := append(frame(len(data), 1), data...)
	reads := hostile(t, a, whole[:1], 1)
	for i := 1; i < len(whole); i++ {
		hostile(t, a, whole[i:i+1], 0)
	}
	m, files, err := recvBounded(t, b)
	if err != nil || m.ID != 7 || len(files) != 1 {
		t.Fatalf("Recv: id %d, %d files, %v", m.ID, len(files), err)
	}
	CloseFiles(files)
	closedOnReceiver(t, "split", reads)
}
