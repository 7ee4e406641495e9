package audit

import (
	"fmt"
	"path/filepath"
)

// Latest returns the newest run under root whose run.start names workspace (an absolute
// path, compared after cleaning), or the newest run of any workspace when workspace is
// "". With no such run the error matches [ErrRunNotFound].
func Latest(root, workspace string) (Run, error) {
	runs, err := List(root)
	if err != nil {
		return Run{}, err
	}
	for _, s := range runs {
		if workspace == "" || (s.Workspace != "" && filepath.Clean(s.Workspace) == filepath.Clean(workspace)) {
			return Run{ID: s.ID, Dir: filepath.Join(root, s.ID)}, nil
		}
	}
	if workspace == "" {
		return Run{}, fmt.Errorf("%w: no runs in %s", ErrRunNotFound, root)
	}
	return Run{}, fmt.Errorf("%w: no run of workspace %s in %s", ErrRunNotFound, workspace, root)
}
