//go:build unix

package gate

import (
	"os/exec"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// setProcessGroup puts the operation in its own process group and makes cancellation
// kill the whole group, so that nothing it started outlives its timeout.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return linux.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
	}
}
