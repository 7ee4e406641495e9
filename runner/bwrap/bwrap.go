// Package bwrap is the Bubblewrap backend: it translates a [contract.Plan] into a bwrap
// command line (mount tree built from the plan, every namespace unshared, capabilities
// dropped) with cordon's own binary as process 1 inside.
package bwrap

import (
	"strconv"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Paths inside the sandbox.
const (
	InitPath    = paths.SandboxInit    // cordon's binary, process 1
	SecretsPath = paths.SandboxSecrets // credential files (deliver: file)
)

// Backend runs sandboxes with Bubblewrap (on Linux; Start is unimplemented elsewhere).
type Backend struct {
	// Path is the bwrap binary; "" means "bwrap" on PATH.
	Path string

	warm warmed // what Warm began, for Start (Linux)
}

// Backend implements every method of sandbox.Backend on every GOOS.
var _ sandbox.Backend = (*Backend)(nil)

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "bwrap" }

// LoopbackEgress implements sandbox.Backend.LoopbackEgress: a bwrap sandbox has a
// network namespace of its own, where process 1 listens for the egress proxy.
func (b *Backend) LoopbackEgress() bool { return false }

// Explain says, for `cordon explain`, how the bwrap backend builds the sandbox from plan.
func (b *Backend) Explain(plan *contract.Plan) string {
	return "bwrap backend: the host paths above appear at the same paths inside; cordon's binary is process 1 (" + InitPath + ", read-only)."
}

// tmpfsSize is bwrap's size option for the next private tmpfs: the plan's bound, or
// nothing (the kernel's half of the host's memory) when the contract lifted it.
func tmpfsSize(plan *contract.Plan) []string {
	if plan.Limits.Tmpfs <= 0 {
		return nil
	}
	return []string{"--size", strconv.FormatInt(plan.Limits.Tmpfs, 10)}
}

// SecretFD is the file descriptor bwrap reads the i-th credential file from.
func SecretFD(i int) int { return 5 + i }

// procSys is where the sandbox's sysctls are.
const procSys = "/proc/sys"

// Args returns bwrap's arguments for plan, ending with the command that starts pid1.
// It is pure: the same plan, host and sysctls give the same arguments. sysctls (only
// where cordon hands the sources over, as root) puts a read-only /proc/sys over the
// fresh procfs's, so that process 1's self-check need not walk it (asking about
// each sysctl, the longest part of every start): bwrap as an unprivileged uid leaves
// the fresh procfs's /proc/sys on /proc's mount, not writable to the sandbox by
// ownership, but not read-only either. The hand-off makes it from a procfs of the
// sandbox's own (handoff.Source.Sysctls): not the host's, which would show its
// inodes' state to every sandbox and let mounts below its /proc/sys reach them.
func Args(plan *contract.Plan, host sandbox.Host, sysctls bool) []string {
	a := []string{
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--disable-userns", // no nested user namespace to regain capabilities in
		"--die-with-parent", "--new-session", "--as-pid-1",
		"--cap-drop", "ALL",
		"--hostname", "cordon",
		"--dev", "/dev",
	}
	// /dev/shm is a tmpfs of its own, sized like every private tmpfs: in bwrap's /dev
	// it would be a directory of a tmpfs with no size.
	a = append(a, "--perms", "1777")
	a = append(a, tmpfsSize(plan)...)
	a = append(a, "--tmpfs", "/dev/shm", "--proc", "/proc")
	if sysctls {
		// "-try" tells it from a contract's grant of the host's /proc/sys (a
		// --ro-bind): the hand-off replaces the source (handedOver).
		a = append(a, "--ro-bind-try", procSys, procSys)
	}
	for _, l := range plan.Links {
		a = append(a, "--symlink", l.Target, l.Path)
	}
	for _, m := range plan.Mounts {
		switch m.Type {
		case contract.Tmpfs:
			perms := "0700"
			if m.Path == "/tmp" {
				perms = "1777"
			}
			a = append(a, "--perms", perms)
			a = append(a, tmpfsSize(plan)...)
			a = append(a, "--tmpfs", m.Path)
		case contract.Mask:
			src := host.MaskFile
			if m.Dir {
				src = host.MaskDir
			}
			a = append(a, "--ro-bind", src, m.Path)
		case contract.Bind:
			if m.Access == contract.ReadWrite {
				a = append(a, "--bind", m.Path, m.Path)
			} else {
				a = append(a, "--ro-bind", m.Path, m.Path)
			}
		}
	}
	for i, sf := range host.SecretFiles {
		a = append(a, "--perms", "0400", "--ro-bind-data", strconv.Itoa(SecretFD(i)), SecretsPath+"/"+sf.Name)
	}
	if host.ControlSocket != "" {
		// Read-only is enough to connect to a socket, and keeps it from being replaced.
		a = append(a, "--ro-bind", host.ControlSocket, sandbox.ControlPath)
	}
	if host.SpillDir != "" {
		a = append(a, "--ro-bind", host.SpillDir, sandbox.SpillPath)
	}
	if host.GateSocket != "" {
		a = append(a, "--ro-bind", host.GateSocket, sandbox.GatePath, "--ro-bind", host.Init, sandbox.GateBinDir+"/cordon")
	}
	a = append(a,
		"--ro-bind", host.Init, InitPath,
		"--remount-ro", "/",
		"--chdir", plan.Workdir,
		"--", InitPath, "internal", "init",
	)
	return a
}
