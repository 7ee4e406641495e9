package cli

import (
	"os"
	"strings"
	"testing"
)

// An empty cordon.yaml that no live run claims as its placeholder (one a cordon killed
// as its run started left behind, unrecorded) fails the load with a way out; a
// contract file that is merely wrong does not get that hint.
func TestEmptyDefaultContractSaysWhatItMayBe(t *testing.T) {
	t.Setenv("CORDON_RUN_ROOT", t.TempDir())
	for _, c := range []struct {
		name string
		make func() error
		hint bool
	}{
		{"empty directory", func() error { return os.Mkdir(DefaultContractFile, 0o755) }, true},
		{"empty file", func() error { return os.WriteFile(DefaultContractFile, nil, 0o644) }, true},
		{"bad contract", func() error { return os.WriteFile(DefaultContractFile, []byte("version: 1\nnot_a_key: 1\n"), 0o644) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if err := c.make(); err != nil {
				t.Fatal(err)
			}
			_, err := loadContract("")
			if err == nil {
				t.Fatal("loaded")
			}
			if got := strings.Contains(err.Error(), "remove it, or write the contract there"); got != c.hint {
				t.Errorf("hint %v, want %v: %v", got, c.hint, err)
			}
		})
	}
}
