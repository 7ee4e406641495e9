package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// GC removes what runs whose cordon process is gone left behind under root: their
// placeholders, cgroups and run directories. It returns the run ids it cleaned.
func GC(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading run root: %w", err)
	}
	var cleaned []string
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, "owner.json"))
		var o owner
		if err == nil {
			err = json.Unmarshal(data, &o)
		}
		if err != nil {
			continue // not a run directory, or one being created right now
		}
		if o.PID > 0 && processStart(o.PID) == o.Start {
			continue // its cordon is still running
		}
		rd := &runDir{path: dir, owner: o}
		if err := removeCgroup(e.Name()); err != nil {
			errs = append(errs, err)
		}
		if err := rd.remove(); err != nil {
			errs = append(errs, err)
		}
		cleaned = append(cleaned, e.Name())
	}
	return cleaned, errors.Join(errs...)
}
