package container

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// MountStage mounts the staged run's overlay (in.Host.Stage's upper directory over a
// clone of the workspace, read only) at RunDir/[sandbox.StageRoot] and sets in.StagedRoot, so
// that Mounts binds the workspace, and what the plan mounts inside it, from there.
// The upper directory's root is given the workspace's mode and in.UID, who writes
// there; the lower layer is idmapped to in.UID when the container runs as the
// dedicated id (in.Dedicated) and another uid owns the workspace, as [MountIdmapped]
// does for a direct run. unmount detaches it; gc does, for a run whose cordon was
// killed.
func MountStage(in *Input) (unmount func() error, err error) {
	st := in.Host.Stage
	ws := in.Plan.Workspace
	for _, m := range in.Plan.Mounts {
		if m.Type == contract.Bind && m.Access == contract.ReadWrite && strings.HasPrefix(ws, m.Path+"/") {
			return nil, errdefs.Invalidf("--stage: %s, above the workspace, is writable: only the workspace can be staged; run without --stage", m.Path)
		}
	}
	fi, err := os.Stat(ws)
	if err != nil {
		return nil, err
	}
	if err := os.Chown(st.Upper, in.UID, in.GID); err != nil {
		return nil, fmt.Errorf("preparing the staged workspace: %w", err)
	}
	if err := os.Chmod(st.Upper, fi.Mode().Perm()); err != nil {
		return nil, fmt.Errorf("preparing the staged workspace: %w", err)
	}
	lower, err := stageLower(in)
	if err != nil {
		return nil, err
	}
	defer lower.Close()
	upper, err := linux.OpenDirNoLinks(st.Upper)
	if err != nil {
		return nil, err
	}
	defer upper.Close()
	work, err := linux.OpenDirNoLinks(st.Work)
	if err != nil {
		return nil, err
	}
	defer work.Close()
	ov, err := linux.NewOverlay(lower, upper, work)
	if err != nil {
		return nil, err
	}
	defer ov.Close()
	target := filepath.Join(in.Host.RunDir, sandbox.StageRoot)
	if err := os.Mkdir(target, 0o700); err != nil {
		return nil, err
	}
	if err := linux.AttachTree(ov, target); err != nil {
		return nil, err
	}
	in.StagedRoot = target
	return func() error { return linux.Unmount(target) }, nil
}

// stageLower clones the workspace's mount tree for the overlay's lower layer,
// idmapped to the container's ids when it runs as the dedicated id.
func stageLower(in *Input) (*os.File, error) {
	ws := in.Plan.Workspace
	if in.Dedicated {
		ou, og, err := linux.Owner(ws)
		if err != nil {
			return nil, err
		}
		if ou != in.UID || og != in.GID {
			return idmapTree(ws, ou, og, in.UID, in.GID)
		}
	}
	return linux.CloneTree(nil, ws, nil)
}

// CanStage says why backend cannot stage here: only root mounts the overlay.
func CanStage(backend string) error {
	if os.Geteuid() != 0 {
		return errdefs.Unavailablef("%s: staged runs need cordon to run as root (it mounts the workspace's overlay for the engine to bind)", backend)
	}
	return nil
}

// StagedWorkspace opens the staged overlay MountStage attached (following no link):
// the workspace the container sees and writes, for cordon to read and write through
// (sandbox.Sandbox.StagedWorkspace).
func StagedWorkspace(in *Input) (*os.File, error) {
	if in.StagedRoot == "" {
		return nil, errdefs.Invalidf("no staged workspace is mounted")
	}
	return linux.OpenDirNoLinks(in.StagedRoot)
}
