//go:build unix

package command

import (
	"os/exec"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// killGroup runs cmd in a process group of its own and, on timeout, kills the whole
// group: a script's children (a sleep, a hung curl) die with it instead of lingering.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return linux.KillGroup(cmd.Process.Pid, syscall.SIGKILL) }
}
