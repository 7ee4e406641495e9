package admit

import (
	"errors"
	"os"
	"testing"
)

// FuzzCheck: no tenant contract makes Check panic, and every answer is an admission
// compiled for the workspace, ErrInvalid or ErrRefused, never the caller's error.
func FuzzCheck(f *testing.F) {
	for _, p := range []string{"testdata/base.yaml", "testdata/narrow.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(baseHead))
	f.Add([]byte("version: 1\nworkspace: ..\nfilesystem: {readable: [etc-link, \"~/x\", /etc], deny_read: [\"../*\"]}\n"))
	f.Add([]byte("version: 1\ngates: [{name: g, run: [\"{{.Run}}\"], why: x}]\n"))
	f.Add([]byte("version: 1\nenv: {pass: &a [A]}\nx: *a\n---\n"))
	ws, root := workspace(f)
	if err := os.Symlink("/etc", ws+"/etc-link"); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile("testdata/base.yaml")
	if err != nil {
		f.Fatal(err)
	}
	base, err := ParseBase("testdata/base.yaml", data)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, yaml []byte) {
		got, err := Check(base, yaml, ws, root)
		switch {
		case err == nil:
			if got == nil || got.Plan.Workspace != ws {
				t.Fatalf("admitted without a plan for %s: %+v", ws, got)
			}
		case !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRefused):
			t.Fatalf("neither invalid nor refused: %v", err)
		}
	})
}
