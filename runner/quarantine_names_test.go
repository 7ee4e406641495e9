package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDisarmPathNames: disarmPath takes the first free numbered quarantine name, and
// past the ninth a random one, not a tenth: every numbered name the sandbox took
// first costs the live watch a rename on each disarm.
func TestDisarmPathNames(t *testing.T) {
	ws := t.TempDir()
	write := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cordon.yaml")
	got, err := disarmPath(ws, "cordon.yaml")
	if err != nil || got != "cordon.yaml"+quarantineSuffix {
		t.Fatalf("first disarm: %q, %v; want the unnumbered name", got, err)
	}
	write("cordon.yaml")
	if got, err = disarmPath(ws, "cordon.yaml"); err != nil || got != "cordon.yaml"+quarantineSuffix+"-2" {
		t.Fatalf("second disarm: %q, %v; want -2", got, err)
	}
	for i := 3; i <= 100; i++ {
		write("cordon.yaml" + quarantineSuffix + "-" + strconv.Itoa(i))
	}
	if err := os.Remove(filepath.Join(ws, "cordon.yaml"+quarantineSuffix+"-10")); err != nil {
		t.Fatal(err)
	}
	write("cordon.yaml")
	got, err = disarmPath(ws, "cordon.yaml")
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.TrimPrefix(got, "cordon.yaml"+quarantineSuffix+"-")
	if _, numbered := strconv.Atoi(suffix); numbered == nil || len(suffix) != 13 {
		t.Fatalf("disarm with the nine numbered names taken: %q; want a random name", got)
	}
	for i := 3; i <= 9; i++ {
		name := "cordon.yaml" + quarantineSuffix + "-" + strconv.Itoa(i)
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != name {
			t.Errorf("%s: %q, %v; a taken name was renamed over", name, b, err)
		}
	}
}
