// Package ctl is the control channel between cordon on the host and its process 1
// inside a long-lived sandbox (a session). It is one unix connection that process 1
// dials out to, so every backend (bwrap, Docker, containerd, Seatbelt) uses it alike.
// On Linux it is SOCK_SEQPACKET and each message is one packet holding one JSON [Msg];
// macOS has no SOCK_SEQPACKET for unix sockets, so there it is SOCK_STREAM and each
// message is one frame (stream.go). An exec request carries the
// command's stdin, stdout and stderr as file descriptors (SCM_RIGHTS), so output flows
// from the command to the host through pipes without passing through process 1.
//
// It imports only the standard library and internal/linux: it is linked into
// cmd/cordon-init.
package ctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// Ops of [Msg].
const (
	OpHello  = "hello"  // pid1 → host, first: proves it is the process the host started (Linux: with the egress listener attached)
	OpReady  = "ready"  // host → pid1, the answer to hello: the host holds what came with it; pid1 may go on
	OpExec   = "exec"   // host → pid1: run Argv in Dir with the three attached fds
	OpSignal = "signal" // host → pid1: send Sig to exec ID's process group
	OpExit   = "exit"   // pid1 → host: exec ID ended with Code (Error: it never started)
	// A Kubernetes Pod's process 1 listens instead of dialling (it is reached through
	// an exec stream, internal/ctlmux): the host's first message gives it its spec, and
	// it answers with the outcome of its self-check.
	OpSpec   = "spec"   // host → pid1: Spec is process 1's wire.Spec
	OpStatus = "status" // pid1 → host, the answer to spec: Error is why it failed its self-check ("" when it passed)
)

// MaxFiles is the most descriptors one message carries: an exec's stdin, stdout,
// stderr, cgroup directory and that cgroup's cgroup.procs (opened for writing).
const MaxFiles = 5

// MaxMsg is the largest message either side sends. A larger exec request (a huge
// argv) is refused before it is sent.
const MaxMsg = 128 << 10

// Msg is one control message.
type Msg struct {
	Op    string   `json:"op"`
	ID    uint64   `json:"id,omitempty"`
	Token string   `json:"token,omitempty"`
	Argv  []string `json:"argv,omitempty"`
	Dir   string   `json:"dir,omitempty"`
	Sig   int      `json:"sig,omitempty"`
	Code  int      `json:"code,omitempty"`
	Error string   `json:"error,omitempty"`
	// Spec is an OpSpec's wire.Spec (this package does not import the sandbox's wire
	// package: it is only carried here).
	Spec json.RawMessage `json:"spec,omitempty"`
}

// Conn is one end of the control channel. Send may be called from several goroutines;
// Recv from one at a time.
type Conn struct {
	c   *net.UnixConn
	wmu sync.Mutex // wmu serialises Send, so each message is one packet.
	buf []byte
	oob []byte
	// stream is set on a SOCK_STREAM connection: messages are frames, and r holds
	// what was read past the last one (stream.go).
	stream bool
	r      streamState
}

// New wraps a connection of this GOOS's [Network] (from [Listen] or [Dial]).
func New(c *net.UnixConn) *Conn { return newConn(c, Network == "unix") }

func newConn(c *net.UnixConn, stream bool) *Conn {
	n := MaxMsg
	if stream {
		n += frameHeader
	}
	return &Conn{c: c, buf: make([]byte, n), oob: make([]byte, linux.RightsSpace(MaxFiles)), stream: stream}
}

// Dial connects to the host's control socket at path.
func Dial(path string) (*Conn, error) {
	c, err := net.DialUnix(Network, nil, &net.UnixAddr{Name: path, Net: Network})
	if err != nil {
		return nil, err
	}
	return New(c), nil
}

// Listen listens on path for process 1's connection.
func Listen(path string) (*net.UnixListener, error) {
	return net.ListenUnix(Network, &net.UnixAddr{Name: path, Net: Network})
}

// Send writes m as one packet with files attached.
func (c *Conn) Send(m Msg, files ...*os.File) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(data) > MaxMsg {
		return fmt.Errorf("control message of %d bytes is over the %d-byte limit", len(data), MaxMsg)
	}
	if len(files) > MaxFiles {
		return fmt.Errorf("control message with %d descriptors, over the limit of %d", len(files), MaxFiles)
	}
	if c.stream {
		data = append(frame(len(data), len(files)), data...)
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = linux.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _, err = c.c.WriteMsgUnix(data, oob, nil)
	return err
}

// ErrTruncated reports a packet larger than [MaxMsg] or with more descriptors than
// fit: the peer does not speak this protocol.
var ErrTruncated = errors.New("control message truncated")

// Recv reads one packet. The returned files are the caller's to close.
func (c *Conn) Recv() (Msg, []*os.File, error) {
	if c.stream {
		return c.recvFrame()
	}
	n, oobn, flags, _, err := c.c.ReadMsgUnix(c.buf, c.oob)
	if err != nil {
		return Msg{}, nil, err
	}
	files, ferr := parseRights(c.oob[:oobn])
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 {
		CloseFiles(files)
		return Msg{}, nil, ErrTruncated
	}
	if n == 0 {
		CloseFiles(files)
		return Msg{}, nil, net.ErrClosed // a zero-length packet: the peer shut down
	}
	return decode(c.buf[:n], files, ferr)
}

// decode is the message in data, which carried files.
func decode(data []byte, files []*os.File, ferr error) (Msg, []*os.File, error) {
	var m Msg
	if err := json.Unmarshal(data, &m); err != nil || ferr != nil {
		CloseFiles(files)
		return Msg{}, nil, fmt.Errorf("bad control message: %w", errors.Join(err, ferr))
	}
	return m, files, nil
}

// Close closes the connection; the peer's Recv then fails.
func (c *Conn) Close() error { return c.c.Close() }

func parseRights(oob []byte) ([]*os.File, error) {
	fds, err := linux.ParseRights(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, fd := range fds {
		files = append(files, os.NewFile(uintptr(fd), "ctl"))
	}
	return files, nil
}

// CloseFiles closes files (descriptors a message carried).
func CloseFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
