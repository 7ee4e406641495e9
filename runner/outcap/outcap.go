// Package outcap caps one output stream of a command (its stdout or its stderr) for an
// agent's context window, and keeps the whole output in a spill file that the agent can
// page from inside the sandbox.
//
// A [Stream] is an [io.Writer]. It keeps the head of the output: the first [Options.Cap]
// characters (Unicode code points; each byte that is not part of a valid UTF-8 sequence
// counts as one character). When the output is longer:
//
//   - The kept part ends at the last newline within the final 20% of the cap when there
//     is one, so that it ends on a whole line; otherwise it ends after exactly Cap
//     characters. It is never cut inside a multi-byte sequence, even one split across
//     Write calls. Invalid bytes are kept as they are.
//   - [Result.Text] is the kept part followed by one notice line (see [Result.Notice]),
//     which always starts on its own line and ends with a newline.
//   - The spill file at [Options.HostPath] is created on the first character past the
//     cap, never before, so short outputs leave no file. It holds the whole output, the
//     kept part too, byte for byte, up to [Options.MaxSpill] bytes; when more was
//     written it ends with a line saying how many bytes were dropped.
//
// Spill files are written without a file system's reserve for root (Linux's
// WithoutReserve, internal/linux): a full disk ends the spill, never cordon's logs.
//
// The cap never fails a Write: the command's output stream must not break because the
// agent sees less of it. A failure to create or write the spill file stops spilling, the
// partial file is removed, the notice says the rest was not saved, and [Stream.Close]
// returns the error. The same holds for [Options.Forward].
//
// A Stream costs about one copy of the output (to the spill file) plus a count of its
// characters and newlines; it allocates nothing per Write once the cap is reached, and
// holds at most about 4×Cap bytes of output in memory, plus a 64 KiB write buffer for
// the spill file. A Cap above [MaxCap] counts as MaxCap, so a Stream with a cap holds
// at most about 8 MiB whatever cap it is given. With no cap it holds the whole output.
//
// [Sweep] removes a directory's spill files, at the end of an agent's turn.
//
// The API is unstable until v1.
package outcap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/cordonhq/cordon/internal/linux"
)

// DefaultMaxSpill is the size limit of a spill file when [Options.MaxSpill] is zero.
const DefaultMaxSpill = 64 << 20

// MaxCap is the largest cap a Stream keeps: [Options.Cap] above it counts as MaxCap,
// and the output past MaxCap characters is cut (and spilled) as past any cap.
const MaxCap = 2 << 20

// ErrClosed is returned by [Stream.Write] after [Stream.Close].
var ErrClosed = errors.New("output stream is closed")

// Options configures one captured stream (the stdout or the stderr of one command).
// The zero value keeps everything and never spills.
type Options struct {
	// Cap is the number of characters (Unicode code points) kept for the caller.
	// Cap <= 0 means no cap: everything is kept and nothing is spilled. Above
	// [MaxCap] it is MaxCap.
	Cap int
	// HostPath is where the spill file is created on the host, lazily, once the cap is
	// exceeded, with mode 0644; its directory must exist. A file already there is
	// replaced; a symlink there is removed, never followed. Empty means no spill file:
	// the cut part is lost.
	HostPath string
	// ShownPath is the spill file's path as the sandbox sees it, used in the notice,
	// e.g. /run/cordon/spill/14.stdout. Empty means HostPath.
	ShownPath string
	// MaxSpill is the number of bytes of output the spill file may hold; <= 0 means
	// [DefaultMaxSpill]. Beyond it the file is cut too and ends with a line saying how
	// many bytes were dropped (that line is not counted in MaxSpill).
	MaxSpill int64
	// Forward, if not nil, receives the kept part as it streams (live output), and
	// never more than Cap characters: exactly the kept part of [Result.Text], without
	// the notice. Bytes near the cap are held back until it is known whether they are
	// kept. A Forward error stops forwarding and is returned by Close.
	Forward io.Writer
}

// Result is what a closed [Stream] saw and what it shows.
type Result struct {
	// Text is what the caller shows: the kept output, plus Notice when truncated.
	Text string
	// Notice is the line (ending in a newline) appended to Text when the output was
	// cut, or "". For example:
	//
	//	[cordon: output cut at 10000 of 50000 characters (40000 more, 1235 lines in all); whole output: /run/cordon/spill/14.stdout — page it with head, tail or grep]
	Notice string
	// Truncated reports whether the output was longer than the cap.
	Truncated bool
	// SpillPath is Options.ShownPath when truncated and a spill file exists, else "".
	SpillPath string
	// Total is the number of bytes the command wrote to this stream.
	Total int64
	// Chars is the number of characters it wrote.
	Chars int64
	// Lines is the number of lines it wrote; a last line without a newline counts.
	Lines int64
	// Cut is the number of characters not shown.
	Cut int64
}

// Stream captures one output stream; create it with [New]. It is safe for concurrent
// use, but output is meant to come from one writer goroutine at a time, and Close should
// be called once that writer has finished (it may be from another goroutine).
type Stream struct {
	o        Options
	maxSpill int64
	minKeep  int // kept length (characters) from which a newline may end the kept part

	// mu guards the fields below.
	mu     sync.Mutex
	closed bool
	res    Result
	err    error

	total int64
	nl    int64 // newlines
	last  byte  // last byte written
	chars runeCounter

	// head holds the stream's first bytes: everything while not full, and at least the
	// kept part once full. With no cap it holds the whole output.
	head      []byte
	scanned   int  // bytes of head decoded into whole characters
	headChars int  // characters in head[:scanned]
	full      bool // the output has more than Cap characters
	sure      int  // bytes of head that are kept whatever comes next
	nlEnd     int  // bytes up to the last newline within the final 20% of the cap, or 0
	nlChars   int  // characters in head[:nlEnd]
	capEnd    int  // bytes of the first Cap characters, once full
	keep      int  // bytes of the kept part, once full
	fwd       int  // bytes of head forwarded
	fwdErr    error

	spill     *os.File
	spillBuf  *bufio.Writer
	spilled   int64 // bytes of output given to the spill file
	spillLast byte  // the last of them
	spillErr  error
}

// New returns a Stream for o. It creates no file: the spill file is created by the Write
// that first exceeds the cap.
func New(o Options) *Stream {
	o.Cap = min(o.Cap, MaxCap)
	s := &Stream{o: o, maxSpill: o.MaxSpill}
	if s.maxSpill <= 0 {
		s.maxSpill = DefaultMaxSpill
	}
	if o.ShownPath == "" {
		s.o.ShownPath = o.HostPath
	}
	if o.Cap > 0 {
		s.minKeep = o.Cap - o.Cap/5
	}
	return s
}

// Write captures p. It fails only after Close; spill and Forward errors are reported by
// Close.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.total += int64(len(p))
	s.nl += int64(bytes.Count(p, []byte{'\n'}))
	s.last = p[len(p)-1]
	s.chars.write(p)

	if s.o.Cap <= 0 {
		s.head = append(s.head, p...)
		s.forward(len(s.head))
		return len(p), nil
	}
	if s.full {
		s.spillWrite(p)
		return len(p), nil
	}
	before := len(s.head)
	s.head = append(s.head, p[:s.room(len(p))]...)
	s.scan(false)
	if s.full {
		s.startSpill()
		s.spillWrite(s.head[:before])
		s.spillWrite(p)
		s.forward(s.keep)
	} else {
		s.forward(s.sure)
	}
	return len(p), nil
}

// room returns how many of n more bytes head must take to see past the cap: the cap's
// remaining characters take at most 4 bytes each, and one more byte proves the cap is
// exceeded.
func (s *Stream) room(n int) int {
	rem := s.o.Cap - s.headChars
	if rem >= n {
		return n
	}
	return min(n, rem*utf8.UTFMax+1-(len(s.head)-s.scanned))
}

// scan decodes head's new characters up to the cap, and sets full once a byte follows
// the Cap-th character. Unless final, an incomplete sequence at the end waits for more
// bytes; when final, its bytes count as one character each.
func (s *Stream) scan(final bool) {
	for s.scanned < len(s.head) {
		if s.headChars == s.o.Cap {
			s.full = true
			s.capEnd = s.scanned
			s.keep = s.capEnd
			if s.nlEnd > 0 {
				s.keep = s.nlEnd
			}
			return
		}
		b := s.head[s.scanned:]
		r, size := rune(b[0]), 1
		if r >= utf8.RuneSelf {
			if !final && !utf8.FullRune(b) {
				return
			}
			r, size = utf8.DecodeRune(b)
		}
		s.scanned += size
		s.headChars++
		if s.headChars <= s.minKeep {
			s.sure = s.scanned
		}
		if r == '\n' && s.headChars >= s.minKeep {
			s.nlEnd, s.nlChars = s.scanned, s.headChars
			s.sure = s.scanned
		}
	}
}

// forward sends head[s.fwd:end] to Options.Forward.
func (s *Stream) forward(end int) {
	if s.o.Forward == nil || s.fwdErr != nil || end <= s.fwd {
		return
	}
	if _, err := s.o.Forward.Write(s.head[s.fwd:end]); err != nil {
		s.fwdErr = fmt.Errorf("forwarding output: %w", err)
	}
	s.fwd = end
}

// startSpill creates the spill file. A symlink or file already at HostPath is removed
// first and O_EXCL refuses anything that appears in between, so the sandbox cannot make
// the host write through a link it planted.
func (s *Stream) startSpill() {
	if s.o.HostPath == "" {
		return
	}
	if err := os.Remove(s.o.HostPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.spillErr = fmt.Errorf("creating spill file: %w", err)
		return
	}
	var f *os.File
	err := linux.WithoutReserve(func() (err error) {
		f, err = os.OpenFile(s.o.HostPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		return err
	})
	if err != nil {
		s.spillErr = fmt.Errorf("creating spill file: %w", err)
		return
	}
	// Made WithoutReserve, the file is not this process's user's: it is made so.
	err = f.Chown(os.Geteuid(), os.Getegid())
	if err == nil {
		err = f.Chmod(0o644) // whatever the umask
	}
	if err != nil {
		f.Close()
		os.Remove(s.o.HostPath)
		s.spillErr = fmt.Errorf("creating spill file: %w", err)
		return
	}
	s.spill = f
	s.spillBuf = bufio.NewWriterSize(unreserved{f}, 64<<10)
}

// unreserved writes to its file WithoutReserve (internal/linux): a spill file is the
// sandbox's output, and the blocks a file system keeps for root are for cordon's
// records, which must outlive a sandbox that filled its disk.
type unreserved struct{ f *os.File }

func (u unreserved) Write(p []byte) (n int, err error) {
	err = linux.WithoutReserve(func() (err error) {
		n, err = u.f.Write(p)
		return err
	})
	return n, err
}

// spillWrite appends p to the spill file, up to maxSpill bytes.
func (s *Stream) spillWrite(p []byte) {
	if s.spill == nil || s.spillErr != nil {
		return
	}
	room := s.maxSpill - s.spilled
	if int64(len(p)) > room {
		p = p[:room]
	}
	if len(p) == 0 {
		return
	}
	n, err := s.spillBuf.Write(p)
	s.spilled += int64(n)
	if n > 0 {
		s.spillLast = p[n-1]
	}
	if err != nil {
		s.spillErr = fmt.Errorf("writing spill file: %w", err)
	}
}

// finishSpill writes the dropped-bytes line if needed and closes the spill file. On any
// error it removes the file, since a partial copy would pass for the whole output.
func (s *Stream) finishSpill() {
	if s.spill == nil {
		return
	}
	if s.spillErr == nil && s.spilled < s.total {
		var line []byte
		if s.spilled > 0 && s.spillLast != '\n' {
			line = append(line, '\n')
		}
		line = fmt.Appendf(line, "[cordon: spill file cut at %d bytes; %d more bytes dropped]\n", s.spilled, s.total-s.spilled)
		if _, err := s.spillBuf.Write(line); err != nil {
			s.spillErr = fmt.Errorf("writing spill file: %w", err)
		}
	}
	if s.spillErr == nil {
		if err := s.spillBuf.Flush(); err != nil {
			s.spillErr = fmt.Errorf("writing spill file: %w", err)
		}
	}
	if err := s.spill.Close(); err != nil && s.spillErr == nil {
		s.spillErr = fmt.Errorf("closing spill file: %w", err)
	}
	if s.spillErr != nil {
		os.Remove(s.o.HostPath)
		s.spill = nil
	}
}

// Close finishes the stream: it forwards what is left of the kept part, flushes and
// closes the spill file, and returns the Result. Its error joins the spill and Forward
// errors; the Result is complete even then. Close is idempotent.
func (s *Stream) Close() (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.res, s.err
	}
	s.closed = true
	if s.o.Cap > 0 && !s.full {
		s.scan(true)
		if s.full { // the last bytes were an incomplete sequence past the cap
			s.startSpill()
			s.spillWrite(s.head)
		}
	}
	r := Result{Total: s.total, Chars: s.chars.close(), Lines: s.nl}
	if s.total > 0 && s.last != '\n' {
		r.Lines++
	}
	if !s.full {
		s.forward(len(s.head))
		r.Text = string(s.head)
	} else {
		s.forward(s.keep)
		s.finishSpill()
		kept := s.o.Cap
		if s.nlEnd > 0 {
			kept = s.nlChars
		}
		r.Truncated = true
		r.Cut = r.Chars - int64(kept)
		if s.spill != nil {
			r.SpillPath = s.o.ShownPath
		}
		r.Notice = s.notice(kept, r)
		text := s.head[:s.keep]
		if len(text) > 0 && text[len(text)-1] != '\n' {
			text = append(text, '\n')
		}
		r.Text = string(text) + r.Notice
	}
	s.head = nil
	s.res, s.err = r, errors.Join(s.spillErr, s.fwdErr)
	return s.res, s.err
}

// notice returns the line that ends a truncated Text.
func (s *Stream) notice(kept int, r Result) string {
	var where string
	switch {
	case r.SpillPath == "":
		where = "the rest was not saved"
	case s.spilled < s.total:
		where = fmt.Sprintf("first %d of %d bytes: %s — page it with head, tail or grep", s.spilled, s.total, r.SpillPath)
	default:
		where = fmt.Sprintf("whole output: %s — page it with head, tail or grep", r.SpillPath)
	}
	return fmt.Sprintf("[cordon: output cut at %d of %d characters (%d more, %d lines in all); %s]\n",
		kept, r.Chars, r.Cut, r.Lines, where)
}

// runeCounter counts the characters of a stream written in pieces: an incomplete UTF-8
// sequence at the end of a piece waits in pend for the next one.
type runeCounter struct {
	n     int64
	pend  [utf8.UTFMax - 1]byte
	npend int
}

func (c *runeCounter) write(p []byte) {
	if c.npend > 0 {
		// Decode the pending bytes followed by enough of p to finish them.
		var buf [2 * utf8.UTFMax]byte
		n := copy(buf[:], c.pend[:c.npend])
		b := buf[:n+copy(buf[n:], p)]
		off := 0
		for off < n {
			if !utf8.FullRune(b[off:]) { // all of p is in b, and still incomplete
				c.npend = copy(c.pend[:], b[off:])
				return
			}
			_, size := utf8.DecodeRune(b[off:])
			off += size
			c.n++
		}
		p = p[off-n:]
		c.npend = 0
	}
	tail := incompleteTail(p)
	c.n += countRunes(p[:len(p)-tail])
	c.npend = copy(c.pend[:], p[len(p)-tail:])
}

// close returns the count, a pending incomplete sequence counting one per byte.
func (c *runeCounter) close() int64 {
	return c.n + int64(c.npend)
}

// countRunes is [utf8.RuneCount] without its allocation: from the first non-ASCII
// byte, RuneCount copies the rest of p into a string.
func countRunes(p []byte) int64 {
	var n int64
	for i := 0; i < len(p); {
		if i+8 <= len(p) && binary.LittleEndian.Uint64(p[i:])&0x8080808080808080 == 0 {
			n, i = n+8, i+8
			continue
		}
		if p[i] < utf8.RuneSelf {
			n, i = n+1, i+1
			continue
		}
		_, size := utf8.DecodeRune(p[i:])
		n, i = n+1, i+size
	}
	return n
}

// incompleteTail returns the length of the incomplete but so far valid UTF-8 sequence
// that ends p, or 0.
func incompleteTail(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return 0
			}
			return len(p) - i
		}
	}
	return 0
}
