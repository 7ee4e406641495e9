package sandboxinit

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
)

// initListenWait is how long after process 1's start its control socket may still
// be missing: the kubelet reports the container running as soon as process 1 is
// started, before its inner init (which listens) is, and the placement attaches as
// soon as it sees it running.
const initListenWait = 15 * time.Second

// dialInit connects to process 1's control socket. While process 1 is young (started
// less than initListenWait before this process), a missing or not yet listening
// socket is waited for; past that it is gone (taken by the one attach process 1
// allows), and dialInit fails at once.
func dialInit(socket string) (*ctl.Conn, error) {
	deadline := time.Now().Add(initListenWait - sinceInitStart())
	for {
		c, err := ctl.Dial(socket)
		if err == nil || !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)) || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sinceInitStart is how long after process 1 this process started, from their
// starttime in /proc (clock ticks since boot); initListenWait when unknown, so that
// nothing is waited for.
func sinceInitStart() time.Duration {
	init, err1 := startTicks("/proc/1/stat")
	self, err2 := startTicks("/proc/self/stat")
	if err1 != nil || err2 != nil {
		return initListenWait
	}
	const userHZ = 100 // USER_HZ, fixed by the kernel's ABI
	return time.Duration(self-init) * time.Second / userHZ
}

// startTicks is the starttime field of a /proc/PID/stat file.
func startTicks(path string) (int64, error) {
	stat, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from
	// after its last ')'. starttime is field 22, the 20th after it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New(path + ": no command name")
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return 0, errors.New(path + ": too few fields")
	}
	return strconv.ParseInt(fields[19], 10, 64)
}
