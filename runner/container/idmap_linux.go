package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
)

// IdmappedDir is where, in the run directory, [MountIdmapped] attaches the idmapped
// mounts it hands the engine (IdmappedDir/<index>). gc detaches what a killed run
// left, as it does every mount below a run directory.
const IdmappedDir = "idmapped"

// HostIDs sets in.UID and in.GID, the host ids the container's process 1 and commands
// run as: the workspace owner's, so that what the container writes there is the
// owner's; but when root owns the workspace or another writable source the container
// binds, the host uid the runner leased to this run alone (in.Host.UID, asked for by
// [HostUID]), with in.Dedicated set, so that the container is never host root and
// shares no per-uid kernel limit with another run (the engines here give it no user
// namespace: its uid is a host uid). [MountIdmapped] then idmaps the writable sources.
func HostIDs(in *Input) error {
	uid, gid, dedicated, err := hostIDs(*in)
	if err != nil {
		return errdefs.Unavailablef("the sandbox's uid: %w", err)
	}
	switch {
	case dedicated && os.Geteuid() != 0:
		return errdefs.Unavailablef("root owns %s, which the container would write: it runs as an unprivileged uid only with cordon running as root (cordon idmaps it for that uid); run cordon as root, or give the workspace to a user", in.Plan.Workspace)
	case dedicated && in.Host.UID <= 0:
		return errdefs.Unavailablef("root owns %s, which the container would write, and no host uid was leased for the sandbox (cordon never runs it as root, nor as a uid another run may share)", in.Plan.Workspace)
	case dedicated:
		uid, gid = in.Host.UID, in.Host.UID
	}
	in.UID, in.GID, in.Dedicated = uid, gid, dedicated
	return nil
}

// HostUID implements sandbox.Backend.HostUID for the container backends: the workspace
// owner's uid, or a lease of the run's own when root owns a writable source (and
// cordon is root: otherwise HostIDs refuses the run).
func HostUID(plan *contract.Plan) (uid int, lease bool, err error) {
	uid, _, dedicated, err := hostIDs(Input{Plan: plan, Image: plan.Image != ""})
	if err != nil {
		return 0, false, errdefs.Unavailablef("the sandbox's uid: %w", err)
	}
	return uid, dedicated && os.Geteuid() == 0, nil
}

// hostIDs is the workspace owner's ids, and whether root owns the workspace or
// another writable source (the container then needs a uid of its own).
func hostIDs(in Input) (uid, gid int, dedicated bool, err error) {
	uid, gid, err = linux.Owner(in.Plan.Workspace)
	if err != nil {
		return 0, 0, false, err
	}
	dedicated = uid == 0
	for _, m := range in.selected() {
		if dedicated {
			break
		}
		if m.Type == contract.Bind && m.Access == contract.ReadWrite {
			ou, _, err := linux.Owner(m.Path)
			if err != nil {
				return 0, 0, false, err
			}
			dedicated = ou == 0
		}
	}
	return uid, gid, dedicated, nil
}

// MountIdmapped, for a container that runs as the dedicated id (in.Dedicated), mounts
// every writable source another uid owns at RunDir/[IdmappedDir]/<index>, idmapped
// from its owner to in.UID:in.GID (the container sees the owner's files as its own,
// and what it creates is stored as the owner's, as with bwrap), and records it in
// in.Idmapped, so that Mounts binds it, and what the plan mounts inside it, from
// there. A staged run's workspace comes from its overlay instead ([MountStage], first).
// unmount detaches them all; on an error nothing is left mounted.
func MountIdmapped(in *Input) (_ func() error, err error) {
	var targets []string
	// unmount is a variable of its own, not the named result: a failed return sets
	// that to nil before the deferred cleanup below runs.
	unmount := func() error {
		var errs []error
		for i := len(targets) - 1; i >= 0; i-- {
			errs = append(errs, linux.Unmount(targets[i]))
		}
		return errors.Join(errs...)
	}
	if !in.Dedicated {
		return unmount, nil
	}
	defer func() {
		if err != nil {
			_ = unmount()
		}
	}()
	dir := filepath.Join(in.Host.RunDir, IdmappedDir)
	in.Idmapped = map[string]string{}
	for _, m := range in.selected() {
		if m.Type != contract.Bind || m.Access != contract.ReadWrite || in.source(m.Path) != m.Path {
			continue // read-only, or inside the overlay or a source idmapped already
		}
		fi, err := os.Stat(m.Path)
		if err != nil {
			return nil, err
		}
		ou, og, err := linux.Owner(m.Path)
		if err != nil {
			return nil, err
		}
		if ou == in.UID && og == in.GID {
			continue
		}
		if len(targets) == 0 {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return nil, err
			}
		}
		target := filepath.Join(dir, strconv.Itoa(len(targets)))
		if err := idmapAt(m.Path, fi.IsDir(), target, ou, og, in.UID, in.GID); err != nil {
			return nil, err
		}
		targets = append(targets, target)
		in.Idmapped[m.Path] = target
	}
	return unmount, nil
}

// idmapAt mounts an idmapped clone of path's mount tree (files uid:gid own shown as
// toUID:toGID's) at target, which it creates.
func idmapAt(path string, isDir bool, target string, uid, gid, toUID, toGID int) error {
	tree, err := idmapTree(path, uid, gid, toUID, toGID)
	if err != nil {
		return err
	}
	defer tree.Close()
	if isDir {
		err = os.Mkdir(target, 0o700)
	} else {
		err = os.WriteFile(target, nil, 0o600)
	}
	if err != nil {
		return err
	}
	return linux.AttachTree(tree, target)
}

// idmapTree returns a detached clone of path's mount tree, idmapped from uid:gid to
// toUID:toGID.
func idmapTree(path string, uid, gid, toUID, toGID int) (*os.File, error) {
	ns, err := linux.IdmapUserns(uid, toUID, gid, toGID)
	if err != nil {
		return nil, err
	}
	defer ns.Close() // the mount holds its own reference
	tree, err := linux.CloneTree(nil, path, ns)
	if err != nil {
		return nil, fmt.Errorf("idmapping %s for the sandbox uid %d: %w", path, toUID, err)
	}
	// The engine's bind of it keeps these flags (docker's writable binds have none of
	// their own).
	if err := linux.NoSUIDTree(tree); err != nil {
		tree.Close()
		return nil, err
	}
	return tree, nil
}
