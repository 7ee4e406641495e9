package podspec

import (
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/container"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// InitCommand is the sandbox container's command: cordon's process 1, listening on
// its control socket for the placement to attach.
func InitCommand() []string {
	return []string{paths.SandboxInit, "internal", "init", "--pod", ControlSocket}
}

// AttachCommand is what the placement execs in the sandbox container, through the API
// server, to reach process 1: a relay from the exec stream to its control socket.
func AttachCommand() []string {
	return []string{paths.SandboxInit, "internal", "attach", ControlSocket}
}

// kubeletFiles are the files the kubelet (through the runtime) binds read-write into
// every container, whatever its securityContext: each a file of the Pod's own
// directory on the node, none of the node's. They may be mounts read-write; commands
// may not write them (they are not in the Landlock ruleset's write set, nor under
// /dev, whose device nodes commands may write: TerminationLog).
var kubeletFiles = []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", TerminationLog}

// runtimeWritable are the runtime's read-write mounts, as on the container backends:
// on cgroup v1 nodes, /sys/fs/cgroup is the container's private tmpfs holding its
// (read-only) controller mounts (the self-check still refuses a cgroup file system
// mounted read-write there, granted or not).
var runtimeWritable = []string{"/sys/fs/cgroup"}

// InitSpec is process 1's spec for the session's Pod compiled from plan under cfg: it
// serves a session; the mounts that may be read-write are exactly those Compile makes
// writable (the plan's private tmpfs and writable workspace paths, the control
// socket's, the credential files' and the gate socket's volumes), the kubelet's own files and the runtime's mounts that the
// container backends' self-check accepts too; commands may read the image's whole
// root, write the plan's writable paths, and never open the control socket's
// directory. env is the commands' environment. Nothing in it concerns the network:
// process 1 runs the commands in an empty network namespace, and the self-check's
// loopback-only part holds in the Pod as on every backend.
func InitSpec(plan *contract.Plan, cfg Config, env []string) wire.Spec {
	cfg = cfg.withDefaults()
	var writable []string
	for _, m := range container.ImageMounts(plan) {
		if m.Type == contract.Tmpfs || m.Type != contract.Mask && m.Access == contract.ReadWrite {
			writable = append(writable, m.Path)
		}
	}
	writable = append(writable, ControlDir, paths.SandboxSecrets, paths.PodGateDir, TerminationDir)
	writable = append(writable, kubeletFiles...)
	writable = append(writable, runtimeWritable...)
	writable = append(writable, container.MaskedPaths...) // the runtime's masks
	return wire.Spec{
		Dir:      plan.Workdir,
		Writable: writable,
		Read:     []string{"/"},
		Write:    plan.Writable(),
		Hide:     []string{ControlDir, TerminationDir},
		HostUID:  int(cfg.UID),
		Serve:    true,
		Env:      env,
	}
}
