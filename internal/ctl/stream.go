package ctl

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"syscall"
)

// On a SOCK_STREAM connection each message is one frame, written by one sendmsg: a
// 4-byte big-endian length of the JSON, one byte counting the descriptors, the JSON.
// The descriptors travel as that sendmsg's SCM_RIGHTS, which both Linux and XNU attach
// to the frame's first byte and never deliver later than it, so by the time a frame
// is read whole its descriptors are queued; a frame takes as many from the queue as
// its header counts.
const frameHeader = 5

// streamState is what a stream connection has read but not yet returned.
type streamState struct {
	n     int        // bytes of buf holding data not yet returned
	files []*os.File // descriptors received and not yet returned, in order
}

func frame(size, files int) []byte {
	h := make([]byte, frameHeader, frameHeader+size)
	binary.BigEndian.PutUint32(h, uint32(size))
	h[4] = byte(files)
	return h
}

// recvFrame reads until buf holds a whole frame and returns it with its descriptors.
func (c *Conn) recvFrame() (Msg, []*os.File, error) {
	r := &c.r
	for {
		if r.n >= frameHeader {
			size, nf := int(binary.BigEndian.Uint32(c.buf)), int(c.buf[4])
			if size > MaxMsg || nf > MaxFiles {
				return Msg{}, nil, ErrTruncated
			}
			if end := frameHeader + size; r.n >= end {
				if nf > len(r.files) {
					return Msg{}, nil, fmt.Errorf("bad control message: %d descriptors announced, %d received", nf, len(r.files))
				}
				files := append([]*os.File(nil), r.files[:nf]...)
				r.files = r.files[nf:]
				m, files, err := decode(c.buf[frameHeader:end], files, nil)
				r.n = copy(c.buf, c.buf[end:r.n])
				return m, files, err
			}
		}
		n, oobn, flags, _, err := c.c.ReadMsgUnix(c.buf[r.n:], c.oob)
		files, ferr := parseRights(c.oob[:oobn])
		r.files = append(r.files, files...)
		switch {
		case flags&syscall.MSG_CTRUNC != 0:
			return Msg{}, nil, ErrTruncated
		case ferr != nil:
			return Msg{}, nil, fmt.Errorf("bad control message: %w", ferr)
		case err != nil:
			return Msg{}, nil, err
		case n == 0 && oobn == 0:
			return Msg{}, nil, net.ErrClosed // the peer shut down
		}
		r.n += n
	}
}
