package paths

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ReadTrusted reads the file at abs (at most max bytes) when the directories on the
// way to it and the file itself are trusted by this process's user or, failing that,
// by root ([CheckDir], [ReadRecordMax]): nobody else can have put it there, changed
// it, or swapped it since. A file trusted by neither is an error that wraps
// [ErrUnsafe]; cordon reads its own config files, and the files naming where and how
// sandboxes run or holding a cluster's credentials, only this way.
func ReadTrusted(abs string, max int64) ([]byte, error) {
	if !filepath.IsAbs(abs) {
		return nil, fmt.Errorf("%s: not an absolute path", abs)
	}
	var first error
	for _, uid := range trustedUIDs() {
		err := CheckDir(filepath.Dir(abs), uid)
		if err != nil && !errors.Is(err, ErrUnsafe) {
			return nil, err
		}
		var data []byte
		if err == nil {
			data, err = ReadRecordMax(abs, uid, max)
		}
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, ErrUnsafe) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// trustedUIDs are the owners [ReadTrusted] accepts, in order.
func trustedUIDs() []int {
	if Owner() == 0 {
		return []int{0}
	}
	return []int{Owner(), 0}
}
