package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
)

// TestStageRecordReadAsOwnRecord: a stage record is read only as cordon's own: one
// another user could have written (writable by group or others), a link in its place
// and a FIFO are refused with paths.ErrUnsafe; cordon's own (0600) is read.
func TestStageRecordReadAsOwnRecord(t *testing.T) {
	good := func(t *testing.T) string {
		dir := t.TempDir()
		if err := (&stageRecord{Run: "r", Workspace: "/ws", Finished: true}).save(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("own", func(t *testing.T) {
		s, err := loadStage(good(t))
		if err != nil || s.Run != "r" || !s.Finished {
			t.Fatalf("loadStage: %+v, %v", s, err)
		}
	})
	for name, spoil := range map[string]func(t *testing.T, p string){
		"writable by others": func(t *testing.T, p string) { must(t, os.Chmod(p, 0o666)) },
		"writable by group":  func(t *testing.T, p string) { must(t, os.Chmod(p, 0o620)) },
		"a link": func(t *testing.T, p string) {
			other := filepath.Join(t.TempDir(), "forged.json")
			must(t, os.Rename(p, other))
			must(t, os.Symlink(other, p))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := good(t)
			spoil(t, filepath.Join(dir, stageRecordName))
			if s, err := loadStage(dir); !errors.Is(err, paths.ErrUnsafe) {
				t.Fatalf("loadStage of a record %s: %+v, %v; want paths.ErrUnsafe", name, s, err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
