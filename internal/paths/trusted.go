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
	var data []byte
	_, err := trusted(abs, func(uid int) (err error) {
		data, err = ReadRecordMax(abs, uid, max)
		return err
	})
	return data, err
}

// CheckTrusted checks the file at abs as [ReadTrusted] does, without reading it (a
// file too large to read whole, such as a program cordon runs), and returns the uid
// that trusts it.
func CheckTrusted(abs string) (int, error) {
	return trusted(abs, func(uid int) error {
		f, err := openRecord(abs, uid)
		if err == nil {
			f.Close()
		}
		return err
	})
}

// trusted runs check (which refuses a file uid did not write alone) for each uid of
// trustedUIDs whose directory chain to abs is trusted, until one passes. abs must be
// absolute and clean: a ".." is resolved by the kernel through the links before it,
// and would check one chain and open through another.
func trusted(abs string, check func(uid int) error) (int, error) {
	if !filepath.IsAbs(abs) {
		return -1, fmt.Errorf("%s: not an absolute path", abs)
	}
	if filepath.Clean(abs) != abs {
		return -1, fmt.Errorf("%s: not a clean path", abs)
	}
	var first error
	for _, uid := range trustedUIDs() {
		err := CheckDir(filepath.Dir(abs), uid)
		if err != nil && !errors.Is(err, ErrUnsafe) {
			return -1, err
		}
		if err == nil {
			err = check(uid)
		}
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, ErrUnsafe) {
			return -1, err
		}
		if first == nil {
			first = err
		}
	}
	return -1, first
}

// trustedUIDs are the owners [ReadTrusted] accepts, in order.
func trustedUIDs() []int {
	if Owner() == 0 {
		return []int{0}
	}
	return []int{Owner(), 0}
}
