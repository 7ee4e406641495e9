package pid1

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// The files protocol, for container backends, which cannot hand pid1 file descriptors.
// The host prepares a directory that the container sees read-only, and starts pid1 as
// `cordon internal init --dir DIR`. In it:
//
//   - [DirSpec] is the [Spec] as JSON, written before each start.
//   - [DirEnv] is the command's environment, NUL-separated NAME=value pairs. pid1
//     replaces the environment the engine gave it with exactly this one, so nothing of
//     the image or the engine reaches the command, and the values never appear in the
//     engine's container configuration.
//   - [DirStatus] is a FIFO (opening one for writing works on a read-only mount). pid1
//     writes its one-line [Status] into it. The host keeps its end open until the
//     command is over; when it closes early (cordon was killed), pid1 kills the command
//     and exits, which ends the container: the die-with-parent of bwrap.
const (
	DirSpec   = "spec.json"
	DirEnv    = "env"
	DirStatus = "status"
	DirFlag   = "--dir"
)

// channels returns pid1's status writer and spec reader: fds [StatusFD] and [SpecFD],
// or with --dir DIR the files protocol's. It returns nils after saying why on stderr.
func channels() (status, spec *os.File) {
	dir, ok := dirArg(os.Args)
	if !ok {
		return os.NewFile(StatusFD, "status"), os.NewFile(SpecFD, "spec")
	}
	status, spec, watch, err := openDir(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return nil, nil
	}
	go dieWithHost(watch)
	return status, spec
}

// dirArg finds "--dir DIR" or "--dir=DIR" after `internal init`.
func dirArg(args []string) (string, bool) {
	for i, a := range args {
		if a == DirFlag && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, DirFlag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// openDir reads the environment and opens the spec and the status FIFO; watch is a
// second write end of the FIFO for [dieWithHost].
func openDir(dir string) (status, spec *os.File, watch int, err error) {
	env, err := os.ReadFile(filepath.Join(dir, DirEnv))
	if err != nil {
		return nil, nil, -1, fmt.Errorf("reading the environment: %w", err)
	}
	os.Clearenv()
	for _, kv := range strings.Split(string(env), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			os.Setenv(k, v)
		}
	}
	spec, err = os.Open(filepath.Join(dir, DirSpec))
	if err != nil {
		return nil, nil, -1, fmt.Errorf("reading the spec: %w", err)
	}
	fifo := filepath.Join(dir, DirStatus)
	// Non-blocking: with no reader (cordon is gone) the open fails at once with ENXIO.
	fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		spec.Close()
		return nil, nil, -1, fmt.Errorf("opening the status pipe (is cordon still running?): %w", err)
	}
	watch, err = syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		spec.Close()
		syscall.Close(fd)
		return nil, nil, -1, fmt.Errorf("opening the status pipe: %w", err)
	}
	return os.NewFile(uintptr(fd), fifo), spec, watch, nil
}

// dieWithHost kills everything in the sandbox and exits once the host's end of the
// status FIFO is gone.
func dieWithHost(fd int) {
	if waitReaderGone(fd) != nil {
		return // cannot watch; the engine still kills the sandbox on timeout and signals
	}
	// As process 1 of its pid namespace, kill(-1) reaches every other process of the
	// sandbox, and exiting makes the kernel kill whatever is left there. Anywhere else
	// kill(-1) would reach every process of the caller's user on the host: never.
	if os.Getpid() == 1 {
		_ = syscall.Kill(-1, syscall.SIGKILL)
	}
	os.Exit(128 + int(syscall.SIGKILL))
}

// waitReaderGone blocks until the FIFO whose write end is fd has no reader left. A
// pipe's write end reports POLLERR then; ppoll with no requested events reports only
// that (and POLLHUP).
func waitReaderGone(fd int) error {
	const pollErr, pollHup = 0x8, 0x10
	pfd := struct {
		fd              int32
		events, revents int16
	}{fd: int32(fd)}
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, 0, 0, 0, 0)
		switch {
		case errno == syscall.EINTR:
		case errno != 0:
			return errno
		case pfd.revents&(pollErr|pollHup) != 0:
			return nil
		}
	}
}

// PrepareDir is the host side of the files protocol: it creates dir (mode 0700) with
// the environment file and the status FIFO, owned by uid:gid, the user the sandbox
// runs as. The spec comes later, from [WriteSpec], once per command.
func PrepareDir(dir string, env []string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	var b strings.Builder
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("environment entry with a NUL byte")
		}
		b.WriteString(kv)
		b.WriteByte(0)
	}
	if err := os.WriteFile(filepath.Join(dir, DirEnv), []byte(b.String()), 0o400); err != nil {
		return err
	}
	if err := syscall.Mkfifo(filepath.Join(dir, DirStatus), 0o600); err != nil {
		return fmt.Errorf("creating the status pipe: %w", err)
	}
	for _, p := range []string{dir, filepath.Join(dir, DirEnv), filepath.Join(dir, DirStatus)} {
		if err := chown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// WriteSpec writes the spec pid1 reads at its next start, atomically.
func WriteSpec(dir string, spec Spec, uid, gid int) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, DirSpec+".tmp")
	if err := os.WriteFile(tmp, data, 0o400); err != nil {
		return err
	}
	if err := chown(tmp, uid, gid); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, DirSpec))
}

func chown(p string, uid, gid int) error {
	if uid == os.Geteuid() && gid == os.Getegid() {
		return nil
	}
	if err := os.Lchown(p, uid, gid); err != nil {
		return fmt.Errorf("handing %s to the sandbox user %d:%d: %w", filepath.Base(p), uid, gid, err)
	}
	return nil
}

// OpenStatus opens the host's end of the status FIFO. It is opened read-write, so
// that it exists before pid1 starts and reads wait for pid1's line rather than
// seeing end of file; closing it is what tells pid1 that cordon is gone.
func OpenStatus(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, DirStatus), os.O_RDWR, 0)
}

// ReadStatus reads pid1's one status line; ok is false when there was none.
func ReadStatus(r io.Reader) (st Status, ok bool) {
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) || json.Unmarshal(line, &st) != nil {
		return Status{}, false
	}
	return st, true
}
