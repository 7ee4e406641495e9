package linux

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// statusIDs is the Uid and Gid lines of /proc/PID/status, as PidCreds orders them.
func statusIDs(t *testing.T, pid int) [8]uint32 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var ids [8]uint32
	for k, key := range []string{"\nUid:", "\nGid:"} {
		i := bytes.Index(data, []byte(key))
		line, _, _ := strings.Cut(string(data[i+len(key):]), "\n")
		for j, f := range strings.Fields(line) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			ids[4*k+j] = uint32(n)
		}
	}
	return ids
}

// TestPidCredsAsStatus: for every process, the ids PidCreds tells are those its
// status shows (a process gone between the two is skipped).
func TestPidCredsAsStatus(t *testing.T) {
	_, err := PidCreds(os.Getpid())
	// On an older kernel the caller reads status instead; under CI (6.18) it must run.
	testutil.Require(t, err != ErrNoPidCreds, "kernel older than 6.13: no PIDFD_GET_INFO")
	d, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range d {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		got, err := PidCreds(pid)
		if err != nil {
			continue // gone
		}
		if want := statusIDs(t, pid); got != want {
			if _, err := os.Stat("/proc/" + e.Name()); err == nil {
				t.Errorf("pid %d: PidCreds %v; status %v", pid, got, want)
			}
		}
		n++
	}
	if n < 2 {
		t.Errorf("compared %d processes; want the host's", n)
	}
}

// TestPidCredsDistinctIDs: each of the eight ids is told in its place, for a process
// whose real and effective (so saved and file system) uids and gids all differ.
func TestPidCredsDistinctIDs(t *testing.T) {
	pid := testutil.SleeperWithIDs(t, 70001, 70002, 70003, 70004)
	_, err := PidCreds(pid)
	testutil.Require(t, err != ErrNoPidCreds, "kernel older than 6.13: no PIDFD_GET_INFO")
	got, err := PidCreds(pid)
	if err != nil {
		t.Fatal(err)
	}
	want := [8]uint32{70001, 70002, 70002, 70002, 70003, 70004, 70004, 70004}
	if got != want || statusIDs(t, pid) != want {
		t.Errorf("PidCreds %v, status %v; want %v", got, statusIDs(t, pid), want)
	}
	if _, err := PidCreds(1 << 22); !errors.Is(err, os.ErrProcessDone) { // above pid_max
		t.Errorf("PidCreds of no process: %v; want os.ErrProcessDone", err)
	}
}

func BenchmarkScanPidCreds(b *testing.B) {
	names, _ := os.ReadDir("/proc")
	for range b.N {
		for _, e := range names {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				_, _ = PidCreds(pid)
			}
		}
	}
}

func BenchmarkScanStatus(b *testing.B) {
	names, _ := os.ReadDir("/proc")
	buf := make([]byte, 16<<10)
	for range b.N {
		for _, e := range names {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				_, _ = ReadProcFile("/proc/"+e.Name()+"/status", buf)
			}
		}
	}
}
