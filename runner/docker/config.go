package docker

import (
	"slices"
	"strconv"
	"strings"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/cordonhq/cordon/runner/container"
)

// etcFiles are the files Docker would bind read-write into every container (its own
// per-container copies); cordon binds read-only files of its own there instead, which
// keeps Docker from adding them.
var etcFiles = []string{"/etc/hostname", "/etc/hosts", "/etc/resolv.conf"}

// etcContent is what those files hold: no name server (there is no network to reach
// one; the egress proxy resolves names).
var etcContent = map[string]string{
	"/etc/hostname":    "cordon\n",
	"/etc/hosts":       "127.0.0.1\tlocalhost cordon\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	"/etc/resolv.conf": "# cordon: no name server in the sandbox; the egress proxy resolves names\n",
}

// engineWritable are Docker's own read-write mounts that pid1's self-check accepts,
// beyond the masked paths (see container.Writable):
//   - /sys/fs/cgroup: on cgroup v1 hosts, the tmpfs holding the (read-only) controller
//     mounts of the container's own cgroups. It is private to the container and holds
//     nothing of the host; writing there creates files nobody reads.
var engineWritable = []string{"/sys/fs/cgroup"}

// config translates one container's input into Docker's container and host
// configuration. It is pure; etcDir holds the files of etcFiles.
func config(in container.Input, image, etcDir string, labels map[string]string) (*dcontainer.Config, *dcontainer.HostConfig) {
	cfg := &dcontainer.Config{
		Image:      image,
		Entrypoint: container.Argv(),
		User:       strconv.Itoa(in.UID) + ":" + strconv.Itoa(in.GID),
		WorkingDir: in.Plan.Workdir,
		Hostname:   "cordon",
		Labels:     labels,
		// The command's environment reaches it through pid1's init directory; this
		// (empty) one is only pid1's, and keeps values out of `docker inspect`.
		Env:          []string{},
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
	}
	noInit := false
	hc := &dcontainer.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		// The engine's default seccomp profile applies: it is only replaced when a
		// seccomp= option is given.
		SecurityOpt:   []string{"no-new-privileges"},
		IpcMode:       dcontainer.IPCModePrivate,
		MaskedPaths:   container.MaskedPaths,
		ReadonlyPaths: container.ReadonlyPaths,
		Init:          &noInit, // cordon's binary is process 1
		// The command's output goes to cordon and the audit log, never to a log file
		// the engine keeps.
		LogConfig: dcontainer.LogConfig{Type: "none"},
		Tmpfs:     map[string]string{},
	}
	for _, m := range container.Mounts(in) {
		switch m.Type {
		case "tmpfs":
			// Docker mounts tmpfs noexec by default; bwrap's is executable, and builds
			// run what they compile in /tmp.
			opts := slices.Clone(m.Options)
			if !slices.Contains(opts, "noexec") {
				opts = append(opts, "exec")
			}
			hc.Tmpfs[m.Destination] = strings.Join(opts, ",")
		case "bind":
			hc.Mounts = append(hc.Mounts, mount.Mount{
				Type: mount.TypeBind, Source: m.Source, Target: m.Destination,
				ReadOnly:    slices.Contains(m.Options, "ro"),
				BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
			})
		}
	}
	for _, f := range etcFiles {
		if slices.ContainsFunc(hc.Mounts, func(m mount.Mount) bool { return m.Target == f }) {
			continue // the plan mounts it (a mask or a denial): that one stands
		}
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type: mount.TypeBind, Source: etcDir + "/" + f[len("/etc/"):], Target: f, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate},
		})
	}
	lim := in.Plan.Limits
	if lim.Memory > 0 {
		hc.Memory, hc.MemorySwap = lim.Memory, lim.Memory // no swap beyond the limit
	}
	if lim.Pids > 0 {
		n := lim.Pids
		hc.PidsLimit = &n
	}
	if lim.CPU > 0 {
		hc.NanoCPUs = int64(lim.CPU * 1e9)
	}
	return cfg, hc
}
