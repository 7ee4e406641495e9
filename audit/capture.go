package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
	"unicode/utf8"
)

// DefaultHeadBytes is the default of NewCapture's limit.
const DefaultHeadBytes = 4 << 10

// Capture is an io.Writer that records what a command wrote to one output stream: the
// byte count, the SHA-256 of all of it and its first bytes. The runner tees each stream
// into one. A Capture is safe for concurrent use.
type Capture struct {
	limit int
	// mu guards the fields below.
	mu   sync.Mutex
	n    int64
	h    hash.Hash
	head []byte
}

// NewCapture returns a Capture keeping the first limit bytes (DefaultHeadBytes if
// limit <= 0).
func NewCapture(limit int) *Capture {
	if limit <= 0 {
		limit = DefaultHeadBytes
	}
	return &Capture{limit: limit, h: sha256.New()}
}

// Write implements io.Writer; it never fails.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(p))
	c.h.Write(p)
	if room := c.limit - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Output returns the summary so far, for a [CmdEnd]. A head cut short ends at a UTF-8
// character boundary; the writer also trims any partial secret from its end.
func (c *Capture) Output() Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	head := c.head
	truncated := int64(len(head)) < c.n
	if truncated {
		head = trimIncompleteRune(head)
	}
	return Output{
		Bytes:     c.n,
		SHA256:    hex.EncodeToString(c.h.Sum(nil)),
		Head:      string(head),
		Truncated: truncated,
	}
}

// trimIncompleteRune drops a UTF-8 sequence cut short at the end of b.
func trimIncompleteRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}
