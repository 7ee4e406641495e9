package ctl

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pair is two connected ends of this GOOS's Network, from Listen and Dial.
func pair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); sc.Close() })
	return client, New(sc)
}

// streamPair is two connected ends of a SOCK_STREAM unix socket framing messages, as
// on macOS: the framing is tested on every GOOS.
func streamPair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return newConn(cc, true), newConn(sc, true)
}

// TestStreamFramesKeepTheirFiles: on a stream, messages sent back to back (some with
// descriptors, some without, one near MaxMsg so it takes several reads) arrive whole,
// in order, each with its own descriptors; the peer hanging up ends Recv.
func TestStreamFramesKeepTheirFiles(t *testing.T) {
	a, b := streamPair(t)
	type sent struct {
		argv  string
		files int
	}
	msgs := []sent{{"one", 3}, {"two", 0}, {strings.Repeat("x", MaxMsg-100), 1}, {"four", 5}, {"five", 0}}
	var keep []*os.File
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, m := range msgs {
			var files []*os.File
			for range m.files {
				r, w, err := os.Pipe()
				if err != nil {
					t.Error(err)
					return
				}
				keep = append(keep, r)
				files = append(files, w)
			}
			if err := a.Send(Msg{Op: OpExec, ID: uint64(i), Argv: []string{m.argv}}, files...); err != nil {
				t.Error(err)
				return
			}
			CloseFiles(files)
		}
		a.Close()
	}()
	for i, want := range msgs {
		m, files, err := b.Recv()
		if err != nil || m.ID != uint64(i) || len(m.Argv) != 1 || m.Argv[0] != want.argv || len(files) != want.files {
			t.Fatalf("message %d: got id %d, %d files, %v", i, m.ID, len(files), err)
		}
		for _, f := range files {
			if _, err := f.WriteString("ok"); err != nil {
				t.Errorf("message %d: writing to a passed pipe: %v", i, err)
			}
		}
		CloseFiles(files)
	}
	if _, _, err := b.Recv(); err == nil {
		t.Fatal("Recv after the peer closed: want an error")
	}
	<-done
	CloseFiles(keep)
}

// TestStreamRefusesOversizedFrame: a frame announcing more than MaxMsg is refused.
func TestStreamRefusesOversizedFrame(t *testing.T) {
	a, b := streamPair(t)
	if _, err := a.c.Write(frame(MaxMsg+1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Recv(); err != ErrTruncated {
		t.Fatalf("Recv: %v, want ErrTruncated", err)
	}
}

// TestSendRecvPassesFiles: a message arrives whole, with its descriptors usable on the
// other side.
func TestSendRecvPassesFiles(t *testing.T) {
	a, b := pair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := a.Send(Msg{Op: OpExec, ID: 7, Argv: []string{"echo", "hi"}, Dir: "/w"}, w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	m, files, err := b.Recv()
	if err != nil || m.Op != OpExec || m.ID != 7 || strings.Join(m.Argv, " ") != "echo hi" || len(files) != 1 {
		t.Fatalf("got %+v, %d files, %v", m, len(files), err)
	}
	if _, err := files[0].WriteString("through the passed fd"); err != nil {
		t.Fatal(err)
	}
	files[0].Close()
	got, _ := io.ReadAll(r)
	if string(got) != "through the passed fd" {
		t.Errorf("read %q", got)
	}
}

// TestOversizedRefused: a message over MaxMsg is refused before it is sent; a peer
// closing ends Recv.
func TestOversizedRefused(t *testing.T) {
	a, b := pair(t)
	if err := a.Send(Msg{Op: OpExec, Argv: []string{strings.Repeat("x", MaxMsg)}}); err == nil {
		t.Fatal("an oversized message was sent")
	}
	a.Close()
	if _, _, err := b.Recv(); err == nil {
		t.Fatal("Recv after the peer closed: want an error")
	}
}
