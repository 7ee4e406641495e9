package sandboxinit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// The starttime field is found past a command name holding spaces and parentheses.
func TestStartTicks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	stat := "42 (a ) (b) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10\n"
	if err := os.WriteFile(p, []byte(stat), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := startTicks(p); err != nil || got != 123456 {
		t.Fatalf("startTicks = %d, %v; want 123456", got, err)
	}
	if _, err := startTicks("/proc/self/stat"); err != nil {
		t.Fatalf("startTicks of this process: %v", err)
	}
}

// Long after process 1 started (the test machine's), a missing socket is gone for
// good: the dial fails at once, as a second attach must.
func TestDialInitOldInit(t *testing.T) {
	testutil.Require(t, sinceInitStart() >= initListenWait, "process 1 of this pid namespace started more than initListenWait ago")
	began := time.Now()
	_, err := dialInit(filepath.Join(t.TempDir(), "init.sock"))
	if !errors.Is(err, fs.ErrNotExist) || time.Since(began) > time.Second {
		t.Fatalf("dialInit of a missing socket = %v after %s, want ErrNotExist at once", err, time.Since(began))
	}
}
