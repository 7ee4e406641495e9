//go:build linux && !noengines

package cli

import (
	"fmt"
	"io"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/container"
	"github.com/cordonhq/cordon/runner/containerd"
	"github.com/cordonhq/cordon/runner/docker"
)

// containerBackends are the container backends, in --backend auto's order of
// preference after bwrap.
func containerBackends() []backendInfo {
	return []backendInfo{
		{name: "docker", backend: &docker.Backend{}, needsImage: true},
		{name: "containerd", backend: &containerd.Backend{}, needsImage: true},
	}
}

// explainContainer says how a container backend builds the sandbox from plan.
func explainContainer(w io.Writer, backend string, plan *contract.Plan) {
	if backend != "docker" && backend != "containerd" {
		return
	}
	fmt.Fprintf(w, "\n%s backend: one container per run or session, its process 1 serving every command (labels %s=<run id>, %s=%s).\n", backend, container.LabelRun, container.LabelContract, plan.ContractDigest)
	if plan.Image != "" {
		fmt.Fprintf(w, "  Root file system: the image %s (read-only; pull: %s). The @system rows above are not mounted: the image provides its own system.\n", plan.Image, plan.Pull)
	} else {
		fmt.Fprintf(w, "  Root file system: no image is named, so an empty read-only root holding the links above, with every host path above mounted at the same path (the host view, as bwrap).\n")
	}
	fmt.Fprintf(w, "  The workspace %s is bind-mounted read-write at the same path, %s; the read-only and hidden rows above are mounted over it; /tmp and $HOME are private tmpfs.\n", plan.Workspace, plan.Workspace)
	user := "the workspace owner's uid:gid"
	if uid, gid, err := container.WorkspaceOwner(plan.Workspace); err == nil {
		user = fmt.Sprintf("uid:gid %d:%d (the workspace owner's)", uid, gid)
	}
	net := "--network none"
	if backend == "containerd" {
		net = "an empty network namespace"
	}
	fmt.Fprintf(w, "  Runs as %s, with no capabilities, no-new-privileges and the engine's default seccomp profile; no network (%s) but the egress bridge on %s; cordon's binary is process 1 (%s, read-only).\n", user, net, runner.BridgeAddr, container.InitPath)
}
