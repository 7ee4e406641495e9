package kubernetes

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/server/workspace"
)

// namesOf sees every entry of the tar its reader passes on, and passes it unchanged.
func TestNamesOf(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "./dir/a.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "dir"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("hi"))
		}
	}
	tw.Close()
	names, tee := namesOf(bytes.NewReader(buf.Bytes()))
	got, err := io.ReadAll(tee)
	if err != nil || !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("the tee changed the stream (%v)", err)
	}
	known, err := names()
	if err != nil || len(known) != 3 || !known["dir"] || !known["dir/a.txt"] || !known["link"] {
		t.Errorf("names: %v, %v", known, err)
	}
	// Abandoned half way: names still returns, with what it saw.
	names, tee = namesOf(bytes.NewReader(buf.Bytes()))
	io.ReadFull(tee, make([]byte, 600))
	if _, err := names(); err == nil {
		t.Error("a tar cut short: no error")
	}
}

// A sync changes a path a command may write when the host lacks it or the Pod had it
// at the last sync; never a file the host made since, nor a path of the plan's that
// commands cannot write.
func TestSyncable(t *testing.T) {
	ws := t.TempDir()
	for _, f := range []string{"pods.txt", ".git/config", "edited.txt", "removed.txt"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o644)
	}
	sb := &podSandbox{plan: &contract.Plan{Workspace: ws, Mounts: []contract.Mount{
		{Path: ws, Type: contract.Bind, Access: contract.ReadWrite},
		{Path: filepath.Join(ws, ".git"), Type: contract.Bind, Access: contract.ReadOnly},
		{Path: filepath.Join(ws, ".env"), Type: contract.Mask},
	}}}
	sb.remember(map[string]bool{"pods.txt": true, ".git/config": true, "edited.txt": true, "removed.txt": true}, nil, nil)
	// After the sync: the host makes one file, edits one, removes one.
	os.WriteFile(filepath.Join(ws, "hosts.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(ws, "edited.txt"), []byte("the host's edit"), 0o644)
	os.Remove(filepath.Join(ws, "removed.txt"))
	sb.keptNow = map[string]bool{} // a sync
	for rel, want := range map[string]bool{
		"pods.txt":    true,  // the Pod had it: its change or removal comes back
		"new.txt":     true,  // the host lacks it: the Pod made it
		"hosts.txt":   false, // the host made it since: kept
		"edited.txt":  false, // the host changed it since: kept
		"removed.txt": false, // the host removed it since: not made again
		".git/config": false, // read-only to commands
		".env":        false, // hidden
	} {
		if got := sb.syncable(rel); got != want {
			t.Errorf("syncable(%q) = %v, want %v", rel, got, want)
		}
	}
	// The sync succeeded: what the host kept stays the host's at the next sync too,
	// though its stamps are now what the host has (the Pod still holds its stale copy).
	sb.remember(map[string]bool{"pods.txt": true, ".git/config": true, "edited.txt": true, "removed.txt": true, "hosts.txt": true}, nil, nil)
	sb.keptNow = map[string]bool{}
	for rel, want := range map[string]bool{"pods.txt": true, "hosts.txt": false, "edited.txt": false, "removed.txt": false} {
		if got := sb.syncable(rel); got != want {
			t.Errorf("at the next sync, syncable(%q) = %v, want %v", rel, got, want)
		}
	}
	os.Symlink("/etc", filepath.Join(ws, "abs"))
	os.Symlink("../..", filepath.Join(ws, "up"))
	os.Symlink("pods.txt", filepath.Join(ws, "in"))
	if !sb.linkOut("abs") || !sb.linkOut("up") || sb.linkOut("in") || sb.linkOut("pods.txt") {
		t.Error("linkOut: a link leaving the workspace is not told from one that stays, or a file")
	}
	if !sb.hidden(".env") || sb.hidden("pods.txt") {
		t.Error("hidden: the mask is not hidden, or the workspace is")
	}
}

// A host edit of the same size with its modification time put back (or made within
// one clock tick of the last sync) still moved the change time: the host changed it.
func TestHostChangedSameSizeSameTime(t *testing.T) {
	ws := t.TempDir()
	f := filepath.Join(ws, "f.txt")
	os.WriteFile(f, []byte("aaaa"), 0o644)
	sb := &podSandbox{plan: &contract.Plan{Workspace: ws, Mounts: []contract.Mount{{Path: ws, Type: contract.Bind, Access: contract.ReadWrite}}}}
	sb.remember(map[string]bool{"f.txt": true}, nil, nil)
	fi, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	before := ctimeOf(fi.Sys().(*syscall.Stat_t))
	for deadline := time.Now().Add(10 * time.Second); ; { // the clock past the stamp's change time
		os.WriteFile(f, []byte("bbbb"), 0o644)
		os.Chtimes(f, fi.ModTime(), fi.ModTime())
		if now, err := os.Stat(f); err == nil && ctimeOf(now.Sys().(*syscall.Stat_t)) != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the change time did not move in 10 s")
		}
	}
	sb.keptNow = map[string]bool{}
	if sb.syncable("f.txt") {
		t.Error("a same-size host edit with its modification time put back is taken for unchanged")
	}
}

// After a sync of changes the Pod's paths are those it had, less what it removed
// (with everything below), plus what the archive names; only the paths it touched are
// stamped anew, so a host edit of a path the Pod did not touch stays the host's.
func TestAfterChanges(t *testing.T) {
	ws := t.TempDir()
	for _, f := range []string{"keep.txt", "host.txt", "d/x", "d/e/y", "dd/z"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o644)
	}
	sb := &podSandbox{plan: &contract.Plan{Workspace: ws, Mounts: []contract.Mount{{Path: ws, Type: contract.Bind, Access: contract.ReadWrite}}}}
	sb.remember(map[string]bool{"keep.txt": true, "host.txt": true, "d": true, "d/x": true, "d/e": true, "d/e/y": true, "dd": true, "dd/z": true}, nil, nil)
	os.WriteFile(filepath.Join(ws, "host.txt"), []byte("the host's edit"), 0o644)
	os.RemoveAll(filepath.Join(ws, "d"))
	os.WriteFile(filepath.Join(ws, "new.txt"), []byte("n"), 0o644)
	got := workspace.Synced{Changes: true, Names: map[string]bool{"new.txt": true}, Removed: []string{"d"}}
	if err := sb.afterChanges(got, 100); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"keep.txt": true, "host.txt": true, "dd": true, "dd/z": true, "new.txt": true}
	if len(sb.known) != len(want) {
		t.Errorf("known %v; want %v", sb.known, want)
	}
	for rel := range want {
		if !sb.known[rel] {
			t.Errorf("known lacks %s: %v", rel, sb.known)
		}
	}
	sb.keptNow = map[string]bool{}
	sb.remember(sb.known, got.Names, got.Removed)
	if _, ok := sb.stamps["d/e/y"]; ok {
		t.Error("a removed path kept its stamp")
	}
	if !sb.hostChanged("host.txt") {
		t.Error("the host's edit of a path the Pod did not touch was taken for agreed")
	}
	if sb.hostChanged("new.txt") || sb.hostChanged("keep.txt") {
		t.Error("a path the sync made, or one nobody touched, counts as the host's change")
	}
	if err := sb.afterChanges(workspace.Synced{Changes: true, Names: map[string]bool{"a": true, "b": true}}, 6); err == nil {
		t.Error("the paths past the bound were taken")
	}
}
