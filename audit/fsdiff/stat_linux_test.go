package fsdiff

import (
	"testing"
	"time"
)

// indexStat is the change time and inode of key as git writes them into an index entry.
func indexStat(_ *testing.T, key statKey) (ctime time.Time, ino uint32) {
	return time.Unix(0, key.ctime), uint32(key.ino)
}
