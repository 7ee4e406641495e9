package container

import (
	"fmt"
	"strings"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Explain says, for `cordon explain`, how a container backend builds the sandbox from
// plan: engine is the backend's name, network how it gives the container no network.
// The lines are for people; the last has no newline.
func Explain(engine, network string, plan *contract.Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s backend: one container per run or session, its process 1 serving every command (labels %s=<run id>, %s=%s).\n", engine, LabelRun, LabelContract, plan.ContractDigest)
	if plan.Image != "" {
		fmt.Fprintf(&b, "  Root file system: the image %s (read-only; pull: %s). The @system rows above are not mounted: the image provides its own system.\n", plan.Image, plan.Pull)
	} else {
		fmt.Fprintf(&b, "  Root file system: no image is named, so an empty read-only root holding the links above, with every host path above mounted at the same path (the host view, as bwrap).\n")
	}
	fmt.Fprintf(&b, "  The workspace %s is bind-mounted read-write at the same path, %s; the read-only and hidden rows above are mounted over it; /tmp and $HOME are private tmpfs.\n", plan.Workspace, plan.Workspace)
	user := "the workspace owner's uid:gid, or a uid leased to the run when root owns a writable path"
	if uid, gid, dedicated, err := hostIDs(Input{Plan: plan, Image: plan.Image != ""}); err == nil && !dedicated {
		user = fmt.Sprintf("uid:gid %d:%d (the workspace owner's)", uid, gid)
	} else if err == nil {
		user = "a host uid:gid leased to the run alone from cordon's range (never host root: root owns a writable path, which is bound from a mount idmapped from its owner to that uid)"
	}
	fmt.Fprintf(&b, "  Runs as %s, with no capabilities, no-new-privileges and the engine's default seccomp profile; no network (%s) but the egress proxy on %s (its listener made inside by process 1 and handed to cordon); cordon's binary is process 1 (%s, read-only).", user, network, sandbox.ProxyAddr, InitPath)
	return b.String()
}
