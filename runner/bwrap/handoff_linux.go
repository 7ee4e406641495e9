package bwrap

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/handoff"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// handedOver turns bwrap's arguments into the hand-off's (package handoff): every bind source becomes
// its handed-over path, and sources another uid owns are idmapped to the sandbox's.
//
// A staged run's workspace (host.Stage) is handed over as an overlay whose writes go to
// host.Stage.Upper; what is mounted inside it is cloned from that overlay.
func handedOver(args []string, host sandbox.Host, workspace string, uid, gid int) (handoff.Spec, []string, error) {
	sp := handoff.Spec{UID: uid, GID: gid}
	args = append([]string(nil), args...)
	// The run's sockets are the sandbox uid's to connect to (the run directory they
	// are in is root's, mode 0700: only the hand-off reaches them). Handed over first, so
	// that they are handed over as they are, not idmapped.
	for _, p := range []string{host.ControlSocket, host.GateSocket} {
		if p == "" {
			continue
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return handoff.Spec{}, nil, errdefs.Unavailablef("handing %s to the sandbox uid: %w", p, err)
		}
	}
	idmapped := map[int]bool{}
	own := map[string]bool{}
	for _, p := range []string{host.Init, host.MaskFile, host.MaskDir, host.ControlSocket, host.SpillDir, host.GateSocket} {
		if p != "" {
			own[p] = true
		}
	}
	for i := 0; i < len(args)-2; i++ {
		opt := args[i]
		if opt == "--" {
			break
		}
		if opt == "--ro-bind-try" && args[i+1] == procSys && args[i+2] == procSys {
			// Args' read-only /proc/sys: a procfs of the sandbox's own (see Args).
			args[i], args[i+1] = "--ro-bind", filepath.Join(handoff.Root, strconv.Itoa(len(sp.Sources)))
			sp.Sources = append(sp.Sources, handoff.Source{Path: procSys, Dir: true, In: -1, Sysctls: true})
			i += 2
			continue
		}
		if opt != "--bind" && opt != "--ro-bind" {
			continue
		}
		src := args[i+1]
		if own[src] {
			// cordon's own files (the init binary, masks, sockets) may sit behind a
			// link of the host's (an installed cordon); the Plan's paths are resolved
			// already, and a link in one now is the sandbox's doing: refused.
			if r, err := filepath.EvalSymlinks(src); err == nil {
				src = r
			}
		}
		s, err := source(src, opt == "--bind", sp.Sources, idmapped, uid, gid)
		if err != nil {
			return handoff.Spec{}, nil, err
		}
		if host.Stage != nil && src == workspace && s.In < 0 && !overlaid(sp.Sources) {
			// Read-only too: a writable directory inside it is cloned from the
			// overlay, so that its writes are staged as well.
			s.Overlay = &handoff.Overlay{Upper: host.Stage.Upper, Work: host.Stage.Work}
		}
		if host.Stage != nil && opt == "--bind" {
			if err := stagedWrite(src, workspace, s, sp.Sources); err != nil {
				return handoff.Spec{}, nil, err
			}
		}
		if (s.Idmap != nil || s.Overlay != nil) && s.In < 0 {
			idmapped[len(sp.Sources)] = true
		}
		args[i+1] = filepath.Join(handoff.Root, strconv.Itoa(len(sp.Sources)))
		sp.Sources = append(sp.Sources, s)
		i += 2
	}
	return sp, nest(args, sp.Sources, nestHost{reach: reach, resolve: resolveExisting}), nil
}

// reach reports whether rel exists below dir with no symbolic link on the way, itself
// included.
func reach(dir, rel string) bool {
	p := dir
	for _, name := range strings.Split(rel, "/") {
		p = filepath.Join(p, name)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return false
		}
	}
	return true
}

// resolveExisting is p with the links of its longest existing prefix resolved.
func resolveExisting(p string) string {
	var rest []string
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r
		}
		if q == "/" || q == "." {
			return p
		}
		rest = append(rest, filepath.Base(q))
	}
}

// source describes one bind source: inside an earlier idmapped (or overlaid) source it
// is cloned from that one's tree (and so shares its idmap, or its overlay); one
// another uid owns is idmapped.
func source(path string, writable bool, earlier []handoff.Source, idmapped map[int]bool, uid, gid int) (handoff.Source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return handoff.Source{}, errdefs.Unavailablef("%w", err)
	}
	s := handoff.Source{Path: path, Dir: fi.IsDir(), In: -1}
	best := -1
	for j, e := range earlier {
		if idmapped[j] && strings.HasPrefix(path, e.Path+"/") && (best < 0 || len(e.Path) > len(earlier[best].Path)) {
			best = j
		}
	}
	if best >= 0 {
		s.In = best
		return s, nil
	}
	// Granted means granted: a path the contract makes readable or writable is its
	// owner's to the sandbox, as if the sandbox were that owner (before, it was host
	// root, which could read anything granted). Files of other owners inside keep
	// their own permissions.
	ou, og, err := linux.Owner(path)
	if err != nil {
		return handoff.Source{}, err
	}
	if ou != uid || og != gid {
		s.Idmap = &handoff.Owner{UID: ou, GID: og}
	}
	s.Writable = writable
	return s, nil
}

func overlaid(srcs []handoff.Source) bool {
	for _, s := range srcs {
		if s.Overlay != nil {
			return true
		}
	}
	return false
}

// stagedWrite refuses a writable source of a staged run whose writes would not go to
// the overlay: one above the workspace, or one in it not cloned from its overlay.
func stagedWrite(src, workspace string, s handoff.Source, earlier []handoff.Source) error {
	if strings.HasPrefix(workspace, src+"/") {
		return errdefs.Invalidf("--stage: %s, above the workspace, is writable: only the workspace can be staged; run without --stage", src)
	}
	if src != workspace && !strings.HasPrefix(src, workspace+"/") {
		return nil
	}
	for s.Overlay == nil && s.In >= 0 && s.In < len(earlier) {
		s = earlier[s.In]
	}
	if s.Overlay == nil {
		return errdefs.Invalidf("--stage: %s would be written directly, not staged; run without --stage", src)
	}
	return nil
}
