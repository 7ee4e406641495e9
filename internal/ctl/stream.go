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
// The descriptors travel as that sendmsg's SCM_RIGHTS, which the kernel delivers with
// the frame's first byte. Recv never reads past the frame it is reading (the header,
// then exactly the length it gives), so no read can take the next frame's first bytes
// without its descriptors, however the kernel merges stream data: each frame's
// descriptors arrive while that frame is read. A frame that fails (a hang-up inside
// it, more descriptors than a message carries, however they trickle in) closes every
// descriptor received with it, so a hostile peer cannot make the reader hold more than
// MaxFiles of them.
const frameHeader = 5

// streamState is what a stream connection has read of the frame it is reading.
type streamState struct {
	n     int        // bytes of buf holding the frame so far
	files []*os.File // descriptors received with it
}

func frame(size, files int) []byte {
	h := make([]byte, frameHeader, frameHeader+size)
	binary.BigEndian.PutUint32(h, uint32(size))
	h[4] = byte(files)
	return h
}

// recvFrame reads one frame whole and returns it with its descriptors.
func (c *Conn) recvFrame() (Msg, []*os.File, error) {
	r := &c.r
	for {
		want := frameHeader
		if r.n >= frameHeader {
			size, nf := int(binary.BigEndian.Uint32(c.buf)), int(c.buf[4])
			if size > MaxMsg || nf > MaxFiles {
				CloseFiles(r.files)
				*r = streamState{}
				return Msg{}, nil, ErrTruncated
			}
			want += size
			if r.n == want {
				files := r.files
				*r = streamState{}
				if nf != len(files) {
					CloseFiles(files)
					return Msg{}, nil, fmt.Errorf("bad control message: %d descriptors announced, %d received", nf, len(files))
				}
				return decode(c.buf[frameHeader:want], files, nil)
			}
		}
		n, oobn, flags, _, err := c.c.ReadMsgUnix(c.buf[r.n:want], c.oob)
		files, ferr := parseRights(c.oob[:oobn])
		r.files = append(r.files, files...)
		switch {
		case flags&syscall.MSG_CTRUNC != 0, len(r.files) > MaxFiles:
			err = ErrTruncated
		case ferr != nil:
			err = fmt.Errorf("bad control message: %w", ferr)
		case err == nil && n == 0 && oobn == 0:
			err = net.ErrClosed // the peer shut down
		}
		if err != nil {
			// The frame is lost: what came with it is closed, not kept for a next Recv
			// (the stream is out of step; the caller drops the connection).
			CloseFiles(r.files)
			*r = streamState{}
			return Msg{}, nil, err
		}
		r.n += n
	}
}
