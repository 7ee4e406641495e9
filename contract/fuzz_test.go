package contract

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the decoder and, when they decode, to Compile:
// neither may panic, and a rejected contract always says why.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/good", "testdata/bad"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			data, _ := os.ReadFile(file)
			f.Add(data)
		}
	}
	f.Add([]byte("version: 1\nfilesystem: {deny_read: ['**/*', '[']}\n"))
	host := Host{Home: "/nonexistent-home", Cwd: "/nonexistent-cwd"}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if c == nil {
			t.Fatal("nil contract without error")
		}
		_, _ = Compile(c, host)
	})
}
