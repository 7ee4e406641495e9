package sandboxinit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/server/workspace"
)

// A Pod's workspace is an emptyDir volume that the commands see with parts read-only
// (.git, protected names) or masked, so cordon fills it and reads it back in another
// container of the Pod, which mounts the whole volume read-write: a native sidecar
// (podspec.WorkspaceContainerName) that runs `internal podws wait` and into which
// cordon execs `internal podws fill|pack` through the API server.
//
// Not in the sandbox container: Landlock grants by inode, not by path, so a second
// mount of the volume there, however hidden its path, would give every command the
// rights it has on the workspace through that mount too, past the read-only mounts
// over .git and the protected names (and a mount namespace of their own is more than
// a Pod's process 1 can make everywhere). The sidecar shares no mount or pid
// namespace with the commands: none can reach it.

// PodWorkspaceArg is the `internal` subcommand of the workspace sidecar.
const PodWorkspaceArg = "podws"

// PodWorkspaceMain is `internal podws wait` (the sidecar's process: it waits for the
// kubelet's SIGTERM) or `internal podws fill|pack|serve DIR BYTES ENTRIES`: fill unpacks
// the tar on stdin into DIR, pack writes DIR as a tar to stdout, serve a pack for each
// request on stdin, framed (servePacks), each bounded by BYTES and
// ENTRIES (server/workspace: no link followed, no FIFO opened, the tree walked with
// openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS whatever a command renames meanwhile).
// A fill writes a regular file that exists already in place (its inode kept): the
// files the sandbox container's subPath mounts bind, which the init container made
// (podspec.PinnedFiles). Both run in a Landlock domain of DIR alone. It exits 0 when
// done, 1 with the reason on stderr otherwise (a pack's output is then not a whole
// archive: it lacks its end).
func PodWorkspaceMain(args []string) int {
	if len(args) == 1 && args[0] == "wait" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		return 0
	}
	if len(args) != 4 || !filepath.IsAbs(args[1]) {
		fmt.Fprintln(os.Stderr, "usage: cordon internal podws wait | fill|pack|serve /ABSOLUTE/DIR BYTES ENTRIES")
		return 2
	}
	bytes, err1 := strconv.ParseInt(args[2], 10, 64)
	entries, err2 := strconv.Atoi(args[3])
	if err := errors.Join(err1, err2); err != nil || bytes <= 0 || entries <= 0 {
		fmt.Fprintf(os.Stderr, "cordon: internal podws: bad bounds %q %q\n", args[2], args[3])
		return 2
	}
	op, dir, lim := args[0], args[1], workspace.Limits{Bytes: bytes, Entries: entries}
	err := linux.OnOwnThread(func() error {
		if err := confineTo(dir, op == "fill"); err != nil {
			return err
		}
		switch op {
		case "fill":
			inPlace := func(rel string) bool {
				fi, err := os.Lstat(filepath.Join(dir, rel))
				return err == nil && fi.Mode().IsRegular()
			}
			_, err := workspace.UnpackAsCaller(os.Stdin, dir, lim, inPlace)
			return err
		case "pack":
			return pack(os.Stdout, dir, lim)
		case "serve":
			return servePacks(os.Stdin, os.Stdout, dir, lim)
		}
		return fmt.Errorf("%q: neither fill, pack nor serve", op)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", op, err)
		return 1
	}
	return 0
}

// confineTo confines the calling thread (locked to its goroutine, which then does
// the work) to dir, read-write or read-only, with Landlock: defence in depth below
// the tree walk's own containment. Where the kernel has no Landlock the walk's
// containment is all, as for a command there.
func confineTo(dir string, write bool) error {
	if linux.LandlockABI() == 0 {
		return nil
	}
	rules := linux.FSRules{Read: []string{dir}}
	if write {
		rules = linux.FSRules{Write: []string{dir}}
	}
	rs, err := linux.NewRuleset(rules)
	if err != nil {
		return err
	}
	defer rs.Close()
	return rs.RestrictThread() // no_new_privs: the container's allowPrivilegeEscalation is false
}

// pack writes dir to w as a tar (server/workspace.Pack), saying on stderr what it
// left out.
func pack(w io.Writer, dir string, lim workspace.Limits) error {
	_, skipped, err := workspace.Pack(w, dir, lim)
	if skipped > 0 {
		fmt.Fprintf(os.Stderr, "cordon: pack: %d special files (FIFOs, sockets, devices) left out\n", skipped)
	}
	return err
}

// servePacks is `podws serve`: for each request byte read from in, one pack of dir
// written to out framed (server/workspace.WriteFramed: the pack's failure is said on
// the stream, which goes on), until in ends. One exec stream then serves every pack
// of the session: an exec through the API server costs more than packing a small
// workspace. 'p' asks for the whole tree; 'c' for what changed since the last pack
// (server/workspace.PackChanges; the whole tree when there is none whose stamps are
// kept: the first, or one after a pack that failed). Anything else ends it with an
// error.
func servePacks(in io.Reader, out io.Writer, dir string, lim workspace.Limits) error {
	br := bufio.NewReaderSize(in, 16)
	var base workspace.Stamps
	for {
		b, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch b {
		case 'p':
			base = nil
		case 'c':
		default:
			return fmt.Errorf("serve: request %q, want 'p' (the whole tree) or 'c' (its changes)", b)
		}
		var next workspace.Stamps
		err = workspace.WriteFramed(out, func(w io.Writer) error {
			_, skipped, stamps, err := workspace.PackChanges(w, dir, lim, base)
			if skipped > 0 {
				fmt.Fprintf(os.Stderr, "cordon: pack: %d special files (FIFOs, sockets, devices) left out\n", skipped)
			}
			next = stamps // nil when the pack failed
			return err
		})
		if err != nil {
			return err
		}
		base = next
	}
}
