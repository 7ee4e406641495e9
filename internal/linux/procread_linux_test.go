package linux

import (
	"bytes"
	"errors"
	"testing"
)

func TestReadProcFile(t *testing.T) {
	buf := make([]byte, 16<<10)
	data, err := ReadProcFile("/proc/self/status", buf)
	if err != nil || !bytes.Contains(data, []byte("\nUid:")) {
		t.Fatalf("status: %v, %q", err, data)
	}
	if _, err := ReadProcFile("/proc/self/status", make([]byte, 64)); !errors.Is(err, ErrProcFileLong) {
		t.Fatalf("a status longer than 64 bytes read into 64: %v, want ErrProcFileLong", err)
	}
	if _, err := ReadProcFile("/proc/self/no-such-file", buf); err == nil {
		t.Fatal("a missing file read without error")
	}
}
