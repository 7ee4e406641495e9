package runner

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// workspaceAliases are the other paths at which the tree of the directory ws is
// reachable on this host, as /proc/self/mountinfo tells: the same directory of its
// file system through another mount of it (ws on a bind mount of a subdirectory is
// also that subdirectory where the file system's root, or a higher directory, is
// mounted; and the other way round), and an overlay's merged view and its upper
// directory, each of the other. lockWorkspace holds them, and the directories above
// them, as it holds ws: a run elsewhere in the same tree is refused whichever path it
// names. Paths that do not exist are left out.
func workspaceAliases(ws string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	mounts := linux.ParseMountinfo(string(data))
	id, err := linux.MountID(ws)
	if err != nil {
		return nil
	}
	var at *linux.MountInfo
	for i := range mounts {
		if mounts[i].ID == id {
			at = &mounts[i]
		}
	}
	if at == nil {
		return nil
	}
	var out []string
	add := func(p string) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() && p != ws {
			out = append(out, p)
		}
	}
	rel, ok := below(ws, at.Point)
	if !ok {
		return nil
	}
	fsPath := path.Join(at.Root, rel) // ws within its file system
	for _, m := range mounts {
		if m.Dev == at.Dev && m.ID != at.ID {
			if r, ok := below(fsPath, m.Root); ok {
				add(filepath.Join(m.Point, r))
			}
		}
		if m.FSType != "overlay" {
			continue
		}
		upper := superOption(m.Super, "upperdir")
		if upper == "" {
			continue
		}
		if m.ID == at.ID {
			add(filepath.Join(upper, rel)) // the merged view's upper directory
		} else if r, ok := below(ws, upper); ok {
			add(filepath.Join(m.Point, r)) // the upper directory's merged view
		}
	}
	return out
}

// below is p relative to dir when p is dir or under it ("." for dir itself).
func below(p, dir string) (string, bool) {
	if p == dir {
		return ".", true
	}
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), strings.HasPrefix(p, "/")
	}
	if r, ok := strings.CutPrefix(p, dir+"/"); ok {
		return r, true
	}
	return "", false
}

// superOption is the value of name=VALUE in a mount's super-block options, or "".
func superOption(opts, name string) string {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, name+"="); ok {
			return v
		}
	}
	return ""
}
