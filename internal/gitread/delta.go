package gitread

import "fmt"

// patch applies a git delta to base. The delta must name base's exact size, produce at
// most MaxObject bytes, and copy only from within base: anything else is malformed.
func patch(base, delta []byte) ([]byte, error) {
	src, delta, ok := deltaSize(delta)
	if !ok || src != uint64(len(base)) {
		return nil, fmt.Errorf("%w: delta base size", ErrMalformed)
	}
	dst, delta, ok := deltaSize(delta)
	if !ok || dst > MaxObject {
		return nil, fmt.Errorf("%w: delta result size", ErrMalformed)
	}
	out := make([]byte, 0, dst)
	for len(delta) > 0 {
		cmd := delta[0]
		delta = delta[1:]
		switch {
		case cmd&0x80 != 0:
			var off, n uint64
			for i := range 7 {
				if cmd&(1<<i) == 0 {
					continue
				}
				if len(delta) == 0 {
					return nil, fmt.Errorf("%w: delta copy", ErrMalformed)
				}
				if i < 4 {
					off |= uint64(delta[0]) << (8 * i)
				} else {
					n |= uint64(delta[0]) << (8 * (i - 4))
				}
				delta = delta[1:]
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > uint64(len(base)) || uint64(len(out))+n > dst {
				return nil, fmt.Errorf("%w: delta copy out of bounds", ErrMalformed)
			}
			out = append(out, base[off:off+n]...)
		case cmd != 0:
			n := int(cmd)
			if n > len(delta) || uint64(len(out)+n) > dst {
				return nil, fmt.Errorf("%w: delta insert", ErrMalformed)
			}
			out = append(out, delta[:n]...)
			delta = delta[n:]
		default:
			return nil, fmt.Errorf("%w: delta opcode 0", ErrMalformed)
		}
	}
	if uint64(len(out)) != dst {
		return nil, fmt.Errorf("%w: delta result of %d bytes, want %d", ErrMalformed, len(out), dst)
	}
	return out, nil
}

// deltaSize reads a delta header's little-endian base-128 size.
func deltaSize(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, b[i+1:], true
		}
	}
	return 0, b, false
}
