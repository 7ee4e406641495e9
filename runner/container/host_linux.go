package container

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// PrepareInit creates the run's init directory (RunDir/init, shown at [InitDir]):
// pid1's FIFOs, the mount points of the binary, the control socket and the secrets
// tmpfs, and hands what the sandbox user needs to it. It sets in.HostInitDir.
func PrepareInit(in *Input) error {
	dir := filepath.Join(in.Host.RunDir, "init")
	if err := wire.PrepareDir(dir, in.UID, in.GID); err != nil {
		return fmt.Errorf("preparing the init directory: %w", err)
	}
	// Mount points for the mounts inside the read-only directory: the runtime could
	// not create them through it.
	for _, name := range []string{filepath.Base(InitPath), filepath.Base(sandbox.ControlPath), filepath.Base(sandbox.GatePath)} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o400); err != nil {
			return fmt.Errorf("preparing the init directory: %w", err)
		}
	}
	for _, sub := range []string{SecretsDir, sandbox.SpillPath, sandbox.GateBinDir} {
		if err := os.Mkdir(filepath.Join(dir, filepath.Base(sub)), 0o700); err != nil {
			return fmt.Errorf("preparing the init directory: %w", err)
		}
	}
	// The gate's `cordon` is found in GateBinDir, which nothing is mounted over: the
	// sandbox uid (never root's) must search it. The directory is read-only inside.
	if err := os.Chmod(filepath.Join(dir, filepath.Base(sandbox.GateBinDir)), 0o755); err != nil {
		return fmt.Errorf("preparing the init directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(sandbox.GateBinDir), "cordon"), nil, 0o400); err != nil {
		return fmt.Errorf("preparing the init directory: %w", err)
	}
	for _, sock := range []string{in.Host.ControlSocket, in.Host.GateSocket} {
		if sock != "" && in.UID != os.Geteuid() {
			// Connecting needs write permission on the socket; the run directory (0700)
			// keeps everyone else on the host away from it.
			if err := os.Lchown(sock, in.UID, in.GID); err != nil {
				return fmt.Errorf("handing %s to the sandbox user %d:%d: %w", filepath.Base(sock), in.UID, in.GID, err)
			}
		}
	}
	in.HostInitDir = dir
	return nil
}

// Payload is what the host sends pid1 for a command: the sandbox environment and the
// credential files.
func Payload(in Input) wire.Payload {
	p := wire.Payload{Env: in.Host.Env}
	if p.Env == nil {
		p.Env = in.Plan.Environ()
	}
	for _, f := range in.Host.SecretFiles {
		p.FilesDir = SecretsDir
		p.Files = append(p.Files, wire.File{Name: f.Name, Value: f.Value.Reveal()})
	}
	return p
}

// MakeSkeleton creates dir as the host view's root file system: empty, but for the
// plan's symbolic links (/bin -> usr/bin on merged-/usr hosts).
// Its directories are mode 0755 whatever the umask (a session's supervisor has 077):
// the container's uid, never root's, must traverse its root.
func MakeSkeleton(dir string, in Input) error {
	if err := mkdir755(dir); err != nil {
		return err
	}
	for _, l := range Links(in) {
		p := filepath.Join(dir, l.Path)
		for _, d := range missingDirs(dir, filepath.Dir(p)) {
			if err := mkdir755(d); err != nil {
				return err
			}
		}
		if err := os.Symlink(l.Target, p); err != nil {
			return err
		}
	}
	return nil
}

// mkdir755 makes directory d with mode 0755, whatever the umask.
func mkdir755(d string) error {
	if err := os.Mkdir(d, 0o755); err != nil {
		return err
	}
	return os.Chmod(d, 0o755)
}

// missingDirs lists the directories from below root down to d that do not exist yet,
// parents first.
func missingDirs(root, d string) []string {
	var out []string
	for ; d != root && len(d) > len(root); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

// Owner returns this process's [LabelOwner] value: "PID:START:PIDNS".
func Owner() string { return owner.Self().Label() }

// OwnerGone reports whether the cordon process named by a [LabelOwner] value has
// exited. A malformed or missing value counts as gone: only cordon sets these labels.
// An owner in another pid namespace (a cordon in a container sharing the engine) is
// judged as [owner.Process.Alive] says: gone only when it has surely exited.
func OwnerGone(label string) bool {
	p, ok := owner.ParseLabel(label)
	return !ok || !p.Alive()
}

// PrecreateCgroup creates the cgroup v2 directory rel (as the runtime will name it,
// relative to the v2 mount) before the container starts, so that its id, which the
// monitor filters on, is known from Start on. The runtime joins the existing
// directory; it removes it with the container, and RemoveCgroup covers a container
// that never started.
func PrecreateCgroup(rel string) (id uint64, dir string, err error) {
	v2, _, err := linux.CgroupMounts()
	if err != nil {
		return 0, "", err
	}
	if v2 == "" {
		return 0, "", linux.ErrNoCgroup
	}
	dir = filepath.Join(v2, filepath.Clean("/"+rel))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, "", err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return 0, "", err
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, "", fmt.Errorf("no inode for %s", dir)
	}
	return s.Ino, dir, nil
}

// CgroupDir is the cgroup v2 directory rel (relative to the v2 mount), or "" when
// there is no v2 hierarchy.
func CgroupDir(rel string) string {
	v2, _, err := linux.CgroupMounts()
	if err != nil || v2 == "" {
		return ""
	}
	return filepath.Join(v2, filepath.Clean("/"+rel))
}

// RemoveCommandCgroups kills and removes the session command cgroups (cmd-*) below a
// container's cgroup directory dir, which the runtime cannot remove while they exist:
// gc calls it before removing the container of a session whose supervisor died.
func RemoveCommandCgroups(dir string) {
	if dir == "" {
		return
	}
	subs, _ := filepath.Glob(filepath.Join(dir, "cmd-*"))
	for _, sub := range subs {
		if cg, err := linux.OpenCgroup(sub); err == nil {
			_ = cg.Remove()
		}
	}
}

// RemoveCgroup removes a directory PrecreateCgroup made, if it is still there and
// empty (the runtime usually removed it already).
func RemoveCgroup(dir string) {
	if dir != "" {
		_ = os.Remove(dir)
	}
}

// Handoff is what a container's pid1 has been given for one command: its status FIFO
// (held open for the whole command: pid1 kills the container when it closes early, as
// when cordon is killed) and the payload channel.
type Handoff struct {
	Status *os.File
	sent   io.Closer
}

// Hand writes pid1's spec for p into the run's init directory, opens the status FIFO and
// sends the payload (environment and credential files, memory only). engine names the
// backend in errors. Close releases both.
func Hand(engine string, in Input, p sandbox.Process, writable []string) (*Handoff, error) {
	if err := wire.WriteSpec(in.HostInitDir, Spec(in, p, writable), in.UID, in.GID); err != nil {
		return nil, errdefs.Unavailablef("%s: %w", engine, err)
	}
	status, err := wire.OpenStatus(in.HostInitDir)
	if err != nil {
		return nil, errdefs.Unavailablef("%s: %w", engine, err)
	}
	sent, err := wire.Send(in.HostInitDir, Payload(in))
	if err != nil {
		status.Close()
		return nil, errdefs.Unavailablef("%s: %w", engine, err)
	}
	return &Handoff{Status: status, sent: sent}, nil
}

// Close releases the payload channel and the status FIFO.
func (h *Handoff) Close() {
	h.sent.Close()
	h.Status.Close()
}

// CommandCgroup makes the cgroup of one session command below a container's cgroup
// directory dir ("" when the engine's layout is unknown: nil, no error). When the
// container user uid is not cordon's, it is given the container cgroup's and the new
// cgroup's cgroup.procs: process 1 must write both to clone a command into the new one.
// Nothing else can use them: moving a process needs that file of the common ancestor
// of where it is and where it goes, and no process outside the container is below it.
func CommandCgroup(dir string, uid int, name string) (*sandbox.CommandCgroup, error) {
	if dir == "" {
		return nil, nil
	}
	parent, err := linux.OpenCgroup(dir)
	if err != nil {
		return nil, errdefs.Unavailablef("command cgroup: %w", err)
	}
	owner := -1
	if uid != os.Geteuid() {
		owner = uid
		if err := os.Chown(filepath.Join(dir, "cgroup.procs"), uid, -1); err != nil {
			return nil, errdefs.Unavailablef("command cgroup: %w", err)
		}
	}
	return sandbox.NewCommandCgroup(parent, name, owner)
}
