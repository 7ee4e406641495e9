//go:build !linux

package egress

// spliceCopy is splice(2) on Linux; elsewhere it never handles a copy, and the caller
// copies through user memory.
func spliceCopy(dst, src *idleConn, limit int64) (n int64, handled bool, err error) {
	return 0, false, nil
}

// pipeCache holds nothing here.
type pipeCache struct{}

func (*pipeCache) close() {}

// spliceVia never handles a copy here.
func spliceVia(_ *pipeCache, dst, src *idleConn, limit int64) (n int64, handled bool, err error) {
	return 0, false, nil
}
