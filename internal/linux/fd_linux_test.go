package linux

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWaitReaderGone(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "status")
	if err := Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	host, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := OpenFIFOWriter(fifo)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(fd)
	done := make(chan error, 1)
	go func() { done <- WaitReaderGone(fd) }()
	select {
	case err := <-done:
		t.Fatalf("returned while the host still holds the pipe: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	host.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the host's end closed but the watcher did not notice")
	}
}
