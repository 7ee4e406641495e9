package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadRefusesWritableByOthers: a config someone else could have written is not read.
func TestLoadRefusesWritableByOthers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(p, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatalf("mode 0600: %v", err)
	}
	os.Chmod(p, 0o620)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("mode 0620: got %v; want refused", err)
	}
	os.Chmod(p, 0o600)
	if os.Geteuid() == 0 {
		os.Chown(p, 65534, -1)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("owned by uid 65534: got %v; want refused", err)
		}
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(big, make([]byte, MaxSize+1), 0o600)
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file over MaxSize: got %v; want refused", err)
	}
}
