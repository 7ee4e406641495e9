// Package ctlmux carries the control channel (internal/ctl) over one byte stream, for
// a sandbox that cordon reaches only through a stream: a Kubernetes Pod, whose process
// 1 the server reaches through the API server's exec API. The control channel passes
// each command's stdin, stdout and stderr as descriptors, which no stream can carry,
// so the two ends of the stream relay them as data: [Host], on cordon's side, takes
// the supervisor's requests with their descriptors from a local control connection
// and pumps the descriptors' bytes; [Pod], in the Pod (`internal attach`), makes a
// pipe for each of a command's three streams, hands process 1 their ends as the
// request's descriptors, and pumps the other ends. The supervisor and process 1 each
// see a control connection of their own, as on every other backend.
//
// The stream is a sequence of frames: a 13-byte header (kind, exec id, length) and
// the payload. Sizes are bounded on read; an unknown kind or a payload out of bounds
// ends the stream.
//
// The stream also carries the connections commands make to cordon's services in the
// Pod (conn.go): process 1 listens on the proxy address in the commands' network
// namespace (egress) and on the gate socket (approval gates) and hands the listeners
// to [Pod] with its status; each connection accepted there is relayed to [Host], which
// delivers it on that service's [Listener]: to cordon's egress proxy, or to the run's
// gate service. Both kinds share one relay, told apart by the port the open frame
// names.
//
// The frames are a protocol between cordon (the placement's [Host]) and the binary
// in the Pod's init image ([Pod], `internal attach`): a change to them needs both
// upgraded together.
//
// It imports only the standard library, internal/ctl and internal/linux: it is
// linked into cmd/cordon-init.
package ctlmux

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cordonhq/cordon/internal/ctl"
)

// Frame kinds.
const (
	kindMsg    byte = 1 // a ctl.Msg as JSON (id unused)
	kindStdin  byte = 2 // host → pod: bytes for exec id's stdin
	kindStdout byte = 3 // pod → host: bytes of exec id's stdout
	kindStderr byte = 4 // pod → host: bytes of exec id's stderr
	kindEOF    byte = 5 // exec id's stream payload[0] (0 stdin, 1 stdout, 2 stderr) ended

	// A relayed connection's frames (conn.go); id is the connection's.
	kindConnOpen   byte = 6  // pod → host: a connection was accepted on the port payload[0]
	kindConnData   byte = 7  // both ways: its bytes
	kindConnEOF    byte = 8  // both ways: the sender's direction ended (no payload)
	kindConnClose  byte = 9  // both ways: the sender's last frame for it (no payload)
	kindConnCredit byte = 10 // both ways: a uint32 of window given back

	// kindStdinCredit, pod → host, gives back a uint32 of exec id's stdin window: the
	// pod wrote that many bytes to the command's stdin.
	kindStdinCredit byte = 11
)

const (
	headerSize = 13
	// maxData is the largest data frame: a read of a command's output is sent as
	// frames of at most this size.
	maxData = 32 << 10
)

// ErrProtocol is a frame the peer should not have sent.
var ErrProtocol = errors.New("control stream: protocol error")

type frame struct {
	kind byte
	id   uint64
	data []byte // valid until the next read
}

// writer writes whole frames; it is safe for concurrent use.
type writer struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *writer) frame(kind byte, id uint64, data []byte) error {
	b := make([]byte, headerSize, headerSize+len(data))
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:9], id)
	binary.BigEndian.PutUint32(b[9:13], uint32(len(data)))
	b = append(b, data...)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(b)
	return err
}

func (w *writer) msg(m ctl.Msg) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(data) > ctl.MaxMsg {
		return fmt.Errorf("control message of %d bytes is over the %d-byte limit", len(data), ctl.MaxMsg)
	}
	return w.frame(kindMsg, 0, data)
}

// data sends r's bytes as frames of kind for exec id until r ends, then the end of
// that stream (idx). It closes nothing.
func (w *writer) data(kind byte, id uint64, idx byte, r io.Reader) {
	buf := make([]byte, maxData)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if w.frame(kind, id, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = w.frame(kindEOF, id, []byte{idx})
			return
		}
	}
}

// reader reads frames, refusing any out of bounds.
type reader struct {
	r   *bufio.Reader
	buf []byte
}

func newReader(r io.Reader) *reader {
	return &reader{r: bufio.NewReaderSize(r, 64<<10), buf: make([]byte, ctl.MaxMsg)}
}

func (r *reader) next() (frame, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r.r, h[:]); err != nil {
		return frame{}, err
	}
	f := frame{kind: h[0], id: binary.BigEndian.Uint64(h[1:9])}
	n := binary.BigEndian.Uint32(h[9:13])
	var limit uint32
	switch f.kind {
	case kindMsg:
		limit = ctl.MaxMsg
	case kindStdin, kindStdout, kindStderr:
		limit = maxData
	case kindEOF:
		limit = 1
	case kindConnOpen:
		limit = 1
	case kindConnEOF, kindConnClose:
		limit = 0
	case kindConnData:
		limit = maxData
	case kindConnCredit, kindStdinCredit:
		limit = 4
	default:
		return frame{}, fmt.Errorf("%w: frame of kind %d", ErrProtocol, f.kind)
	}
	if n > limit || (f.kind == kindEOF || f.kind == kindConnOpen) && n != 1 || (f.kind == kindConnCredit || f.kind == kindStdinCredit) && n != 4 || f.kind == kindConnData && n == 0 {
		return frame{}, fmt.Errorf("%w: frame of kind %d with %d bytes", ErrProtocol, f.kind, n)
	}
	if _, err := io.ReadFull(r.r, r.buf[:n]); err != nil {
		return frame{}, fmt.Errorf("control stream: a frame cut short: %w", err)
	}
	f.data = r.buf[:n]
	if f.kind == kindEOF && f.data[0] > 2 {
		return frame{}, fmt.Errorf("%w: end of stream %d", ErrProtocol, f.data[0])
	}
	if f.kind == kindConnOpen && !validPort(f.data[0]) {
		return frame{}, fmt.Errorf("%w: a connection on port %d", ErrProtocol, f.data[0])
	}
	return f, nil
}

// decodeMsg is the ctl.Msg of a kindMsg frame.
func decodeMsg(f frame) (ctl.Msg, error) {
	var m ctl.Msg
	if err := json.Unmarshal(f.data, &m); err != nil {
		return ctl.Msg{}, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return m, nil
}
