package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/internal/linux"
)

// The files protocol, for container backends, which cannot hand pid1 file descriptors.
// The host prepares a directory that the container sees read-only, and starts pid1 as
// `cordon internal init --dir DIR`. In it:
//
//   - [DirSpec] is the [Spec] as JSON, written before each start. It holds no secret.
//   - [DirEnv] is a FIFO through which the host sends one JSON line ([Payload]): the
//     command's environment, which replaces the one the engine gave pid1 (nothing of
//     the image or the engine reaches the command), and the credential files, which
//     pid1 writes into the tmpfs the host mounted for them. Values that may be
//     credentials so stay in memory: never in a file on the host, never in the
//     engine's container configuration.
//   - [DirStatus] is a FIFO (opening one for writing works on a read-only mount). pid1
//     writes its one-line [Status] into it. The host keeps its end open until the
//     command is over; when it closes early (cordon was killed), pid1 kills the command
//     and exits, which ends the container: the die-with-parent of bwrap.

// Payload is what the host sends through [DirEnv].
type Payload struct {
	Env []string `json:"env"`
	// FilesDir is where Files go (a private tmpfs); each is created with mode 0400.
	FilesDir string `json:"files_dir,omitempty"`
	Files    []File `json:"files,omitempty"`
}

// PrepareDir is the host side of the files protocol: it creates dir (mode 0700) with
// the environment and status FIFOs, owned by uid:gid, the user the sandbox runs as.
// The spec comes from [WriteSpec] and the payload from [Send], once per command.
func PrepareDir(dir string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{DirEnv, DirStatus} {
		if err := linux.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			return fmt.Errorf("creating the %s pipe: %w", name, err)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, DirEnv), filepath.Join(dir, DirStatus)} {
		if err := chown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// Send queues p for pid1's next start. The payload stays in the pipe (memory) until
// pid1 reads it; the returned file holds the pipe open and must be closed once the
// command is over.
func Send(dir string, p Payload) (io.Closer, error) {
	data, err := json.Marshal(p) // one line: JSON escapes newlines
	if err != nil {
		return nil, err
	}
	// Read-write: the open does not wait for pid1, and the pipe stays alive even
	// before pid1 opens it.
	f, err := os.OpenFile(filepath.Join(dir, DirEnv), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	go func() { _, _ = f.Write(append(data, '\n')) }() // blocks past 64 KiB until pid1 reads
	return f, nil
}

// WriteSpec writes the spec pid1 reads at its next start, atomically.
func WriteSpec(dir string, spec Spec, uid, gid int) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	owner, group := uid, gid
	if uid == os.Geteuid() && gid == os.Getegid() {
		owner, group = -1, -1 // ours already
	}
	if err := atomicfile.WriteOwned(filepath.Join(dir, DirSpec), data, 0o400, owner, group); err != nil {
		return fmt.Errorf("writing the init spec for the sandbox user %d:%d: %w", uid, gid, err)
	}
	return nil
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
