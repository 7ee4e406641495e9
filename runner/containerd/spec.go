package containerd

import (
	"context"
	"slices"

	"github.com/containerd/containerd/containers"
	"github.com/containerd/containerd/contrib/seccomp"
	"github.com/containerd/containerd/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cordonhq/cordon/runner/container"
)

// specOpts builds the container's OCI spec from containerd's defaults (new pid, ipc,
// uts, mount and network namespaces: the network namespace is empty but for
// loopback) as a list of small options, each tested on its own. rootfs is the host
// view's skeleton directory, "" when the root file system is the image's snapshot.
func specOpts(in container.Input, rootfs string) []oci.SpecOpts {
	opts := []oci.SpecOpts{
		oci.WithProcessArgs(container.Argv()...),
		oci.WithProcessCwd(in.Plan.Workdir),
		oci.WithUIDGID(uint32(in.UID), uint32(in.GID)),
		withEnv(nil),
		withInheritedRlimits,
		oci.WithHostname("cordon"),
		oci.WithRootFSReadonly(),
		oci.WithNoNewPrivileges,
		withNoCapabilities,
		// After the capabilities: the default profile allows what the capabilities
		// left need, so it is computed from the final set.
		seccomp.WithDefaultProfile(),
		withClone3NoSys,
		withMounts(container.Mounts(in)),
		oci.WithMaskedPaths(container.MaskedPaths),
		oci.WithReadonlyPaths(container.ReadonlyPaths),
		withLimits(in),
	}
	if rootfs != "" {
		opts = append(opts, oci.WithRootFSPath(rootfs))
	}
	return opts
}

// withEnv sets process 1's environment: nothing. The command's reaches it through
// pid1's init directory.
func withEnv(env []string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.Env = env
		return nil
	}
}

// withInheritedRlimits drops the default spec's 1024-file limit: the sandbox keeps the
// engine's limits, as a Docker container and bwrap's sandbox do.
func withInheritedRlimits(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	s.Process.Rlimits = nil
	return nil
}

// withNoCapabilities empties every capability set, bounding and ambient included.
func withNoCapabilities(ctx context.Context, c oci.Client, ctr *containers.Container, s *oci.Spec) error {
	if err := oci.WithCapabilities([]string{})(ctx, c, ctr, s); err != nil {
		return err
	}
	caps := s.Process.Capabilities
	caps.Bounding, caps.Effective, caps.Permitted, caps.Inheritable, caps.Ambient = []string{}, []string{}, []string{}, nil, nil
	return nil
}

// withMounts keeps the kernel file systems of the default spec (/proc, /dev and its
// pts, shm and mqueue, /sys read-only), drops its writable /run tmpfs, and adds the
// plan's mounts.
func withMounts(plan []specs.Mount) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Mounts = slices.DeleteFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == "/run" })
		s.Mounts = append(s.Mounts, plan...)
		return nil
	}
}

// withLimits applies the plan's limits: memory (without swap beyond it), pids and
// CPU (a CFS quota over a 100 ms period).
func withLimits(in container.Input) oci.SpecOpts {
	return func(ctx context.Context, c oci.Client, ctr *containers.Container, s *oci.Spec) error {
		lim := in.Plan.Limits
		if lim.Memory > 0 {
			if err := oci.WithMemoryLimit(uint64(lim.Memory))(ctx, c, ctr, s); err != nil {
				return err
			}
			swap := lim.Memory
			s.Linux.Resources.Memory.Swap = &swap
		}
		if lim.Pids > 0 {
			if err := oci.WithPidsLimit(lim.Pids)(ctx, c, ctr, s); err != nil {
				return err
			}
		}
		if lim.CPU > 0 {
			const period = 100000
			if err := oci.WithCPUCFS(int64(lim.CPU*period), period)(ctx, c, ctr, s); err != nil {
				return err
			}
		}
		return nil
	}
}

// withClone3NoSys makes clone3 answer ENOSYS, as Docker's profile does for a process
// without CAP_SYS_ADMIN and containerd's does not: clone3's flags are in memory, out of
// any filter's sight, and a user namespace needs no capability to make. libc then
// falls back to clone, whose flags cordon's filter checks; process 1 starts commands
// through the join-cgroup trampoline.
func withClone3NoSys(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
	if s.Linux == nil || s.Linux.Seccomp == nil {
		return nil
	}
	sc := s.Linux.Seccomp
	for i := range sc.Syscalls {
		sc.Syscalls[i].Names = slices.DeleteFunc(sc.Syscalls[i].Names, func(n string) bool { return n == "clone3" })
	}
	sc.Syscalls = slices.DeleteFunc(sc.Syscalls, func(r specs.LinuxSyscall) bool { return len(r.Names) == 0 })
	enosys := uint(38) // ENOSYS
	sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys})
	return nil
}
