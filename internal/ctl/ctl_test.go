package ctl

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func pair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
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
