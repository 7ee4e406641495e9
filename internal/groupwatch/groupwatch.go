// Package groupwatch takes a sandbox's process group with cordon when cordon dies.
//
// Linux sandboxes die with cordon through PDEATHSIG and their pid namespace; macOS has
// neither. There cordon starts, next to the sandbox's process group, a watcher: a small
// process of its own (cordon re-executed as `internal group-watch PGID`) in a process
// group of its own, ignoring the terminal's signals, whose fd 3 is the read end of a
// pipe whose only write end cordon holds. When cordon ends, however it ends (SIGKILL
// included), the kernel closes that write end and the watcher reads EOF: it kills the
// whole group with SIGKILL and exits. When the command ends normally, cordon writes one
// byte first ([Watcher.Release]) and the watcher exits without killing anything.
//
// The sandbox cannot stop its watcher: the Seatbelt profile lets it signal only
// processes of its own sandbox, and the watcher is outside it. What the watcher cannot
// take is a process that left the group (setsid, setpgid): docs/backends.md says so.
package groupwatch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// Arg is the `cordon internal` verb that runs [Main].
const Arg = "group-watch"

// release is the byte that tells the watcher the group ended normally.
const release = 'r'

// Main is the watcher: args is the process group id. It returns the exit status.
func Main(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "cordon group-watch: want one process group id")
		return 2
	}
	pgid, err := strconv.Atoi(args[0])
	if err != nil || pgid <= 1 {
		fmt.Fprintf(os.Stderr, "cordon group-watch: bad process group id %q\n", args[0])
		return 2
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP)
	return watch(os.NewFile(3, "cordon-lifeline"), pgid)
}

// watch blocks until the lifeline says release or is closed; on close it kills pgid.
func watch(lifeline io.Reader, pgid int) int {
	var b [1]byte
	n, _ := lifeline.Read(b[:])
	if n == 1 && b[0] == release {
		return 0
	}
	if err := linux.KillGroup(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(os.Stderr, "cordon group-watch: killing process group %d: %v\n", pgid, err)
		return 1
	}
	return 0
}

// Watcher is a running watcher of one process group.
type Watcher struct {
	cmd  *exec.Cmd
	life *os.File // the write end: closing it (or cordon's death) kills the group
	done bool
}

// Start starts bin (cordon or cordon-init) as the watcher of process group pgid.
func Start(bin string, pgid int) (*Watcher, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("group watcher: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "internal", Arg, strconv.Itoa(pgid))
	cmd.Env = []string{}
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("group watcher: %w", err)
	}
	return &Watcher{cmd: cmd, life: w}, nil
}

// Release tells the watcher the group is done with (killed or ended by cordon itself)
// and waits for it to exit without killing anything.
func (w *Watcher) Release() error {
	if w.done {
		return nil
	}
	w.done = true
	_, werr := w.life.Write([]byte{release})
	w.life.Close()
	err := w.cmd.Wait()
	if werr != nil {
		return fmt.Errorf("group watcher: %w", werr)
	}
	if err != nil {
		return fmt.Errorf("group watcher: %w", err)
	}
	return nil
}

// Kill has the watcher kill the group now, as cordon's death would, and waits for it.
func (w *Watcher) Kill() error {
	if w.done {
		return nil
	}
	w.done = true
	w.life.Close()
	if err := w.cmd.Wait(); err != nil {
		return fmt.Errorf("group watcher: %w", err)
	}
	return nil
}
