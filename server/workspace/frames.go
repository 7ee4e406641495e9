package workspace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cordonhq/cordon/internal/termtext"
)

// Framed packs: one long-lived stream carrying one pack after another. A Pod's
// workspace sidecar serves its packs this way, on one exec stream for the session's
// life, because an exec through the API server costs far more than packing a small
// workspace. A pack on the stream is data frames (a 4-byte big-endian length, 1 to
// [MaxFrame], then that many bytes of the archive), then a zero length and the
// pack's outcome (a 4-byte length, at most [MaxFrameError], then the error's text;
// empty when the pack succeeded).

// Bounds of a framed pack's frames.
const (
	MaxFrame      = 64 << 10
	MaxFrameError = 4 << 10
)

// ErrFrames is a framed stream that broke its format: nothing more is read from it.
var ErrFrames = errors.New("framed pack stream")

// WriteFramed writes what pack writes to w as one framed pack, then pack's outcome,
// and flushes. Its error is w's: the stream is then of no further use.
func WriteFramed(w io.Writer, pack func(io.Writer) error) error {
	bw := bufio.NewWriterSize(w, MaxFrame+4)
	fw := &frameWriter{w: bw}
	perr := pack(fw)
	if fw.err != nil {
		return fw.err
	}
	msg := ""
	if perr != nil {
		if msg = perr.Error(); msg == "" {
			msg = "the pack failed"
		}
		msg = msg[:min(len(msg), MaxFrameError)]
	}
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(msg)))
	if _, err := bw.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := bw.WriteString(msg); err != nil {
		return err
	}
	return bw.Flush()
}

// frameWriter writes each Write as frames of at most MaxFrame bytes, keeping the
// first error.
type frameWriter struct {
	w   *bufio.Writer
	err error
}

func (f *frameWriter) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n := len(p)
	for len(p) > 0 {
		c := p[:min(len(p), MaxFrame)]
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(c)))
		if _, f.err = f.w.Write(hdr[:]); f.err == nil {
			_, f.err = f.w.Write(c)
		}
		if f.err != nil {
			return 0, f.err
		}
		p = p[len(c):]
	}
	return n, nil
}

// ReadFramed copies one framed pack from r to w and returns its outcome (the packer's
// error text escaped as [termtext.Line]: it may name a sandbox's files); ok says
// whether the stream may carry the next pack: false after a frame past the bounds
// (wrapping [ErrFrames]) or r's end or error. The packer's failure is an error with
// ok true; so is w's (the rest of the pack is read and dropped, the stream kept in
// step).
func ReadFramed(r io.Reader, w io.Writer) (ok bool, err error) {
	var hdr [4]byte
	var werr error
	buf := make([]byte, MaxFrame)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return false, fmt.Errorf("%w: %w", ErrFrames, unexpected(err))
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			break
		}
		if n > MaxFrame {
			return false, fmt.Errorf("%w: a frame of %d bytes, at most %d", ErrFrames, n, MaxFrame)
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return false, fmt.Errorf("%w: %w", ErrFrames, unexpected(err))
		}
		if werr == nil {
			_, werr = w.Write(buf[:n])
		}
	}
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return false, fmt.Errorf("%w: %w", ErrFrames, unexpected(err))
	}
	m := binary.BigEndian.Uint32(hdr[:])
	if m > MaxFrameError {
		return false, fmt.Errorf("%w: an outcome of %d bytes, at most %d", ErrFrames, m, MaxFrameError)
	}
	msg := make([]byte, m)
	if _, err := io.ReadFull(r, msg); err != nil {
		return false, fmt.Errorf("%w: %w", ErrFrames, unexpected(err))
	}
	switch {
	case m > 0:
		// The packer's text holds names a sandbox chose: shown escaped, one line.
		return true, fmt.Errorf("the pack failed: %s", termtext.Line(string(msg)))
	case werr != nil:
		return true, werr
	}
	return true, nil
}

// unexpected is err, with a clean end of the stream mid-pack made an unexpected one.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
