package linux

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// The cookie fallback of InOwnNetns (where SIOCGSKNS is refused) tells this namespace's
// sockets as its own.
func TestNetnsCookieOfOwnSockets(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var theirs uint64
	if err := control(f, func(fd int) (err error) { theirs, err = netnsCookie(fd); return err }); err != nil {
		t.Fatal(err)
	}
	own, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(own)
	ours, err := netnsCookie(own)
	if err != nil || ours != theirs || ours == 0 {
		t.Errorf("cookies %d and %d (%v); want one, not 0", theirs, ours, err)
	}
	if in, err := InOwnNetns(f); err != nil || !in {
		t.Errorf("InOwnNetns of a socket made here = %v, %v", in, err)
	}
}
