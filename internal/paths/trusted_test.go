package paths

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadTrusted: a file is read when nobody but its owner (this user or root) can
// have changed it or the directories on the way; each way another user could is
// refused as unsafe, and a bound is kept.
func TestReadTrusted(t *testing.T) {
	b := base(t)
	good := filepath.Join(b, "placement.yaml")
	if err := os.WriteFile(good, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadTrusted(good, 100); err != nil || string(data) != "version: 1\n" {
		t.Fatalf("a trusted file: %q %v", data, err)
	}
	if _, err := ReadTrusted(good, 4); err == nil {
		t.Fatal("a file past the bound was read")
	}
	if _, err := ReadTrusted("placement.yaml", 100); err == nil {
		t.Fatal("a relative path was read")
	}

	open := filepath.Join(b, "open")
	mkdir(t, open, 0o777, me(t)) // anyone may swap what is in it
	inOpen := filepath.Join(open, "placement.yaml")
	if err := os.WriteFile(inOpen, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadTrusted(inOpen, 100)
	wantUnsafe(t, err, "a file in a directory others may write")

	writable := filepath.Join(b, "w.yaml")
	if err := os.WriteFile(writable, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(writable, 0o664)
	_, err = ReadTrusted(writable, 100)
	wantUnsafe(t, err, "a file its group may write")

	link := filepath.Join(b, "l.yaml")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	_, err = ReadTrusted(link, 100)
	wantUnsafe(t, err, "a symbolic link")

	theirs := filepath.Join(b, "theirs.yaml")
	if err := os.WriteFile(theirs, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if me(t) == 0 {
		if err := os.Chown(theirs, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
		_, err = ReadTrusted(theirs, 100)
		wantUnsafe(t, err, "a file another uid owns")
	}
}
