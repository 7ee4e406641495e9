//go:build linux

package kubernetes

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/server/workspace"
)

// podStream plays a session's syncs without a cluster: pod stands for the Pod's
// volume (the sidecar's server/workspace.PackChanges with its stamps), sb's
// workspace for the host's, and each round is what sb.sync does with the archive.
type podStream struct {
	t    *testing.T
	sb   *podSandbox
	pod  string
	base workspace.Stamps
}

// round is one sync: of changes when changes is true (and the stream has a base),
// whole otherwise. It waits out the racy window first (file times of the writes just
// made must be past it, or every stamp is racy and the round sends all).
func (p *podStream) round(changes bool) workspace.Synced {
	p.t.Helper()
	time.Sleep(250 * time.Millisecond)
	if !changes {
		p.base = nil
	}
	var b bytes.Buffer
	_, _, next, err := workspace.PackChanges(&b, p.pod, p.sb.limits(), p.base)
	if err != nil {
		p.t.Fatal(err)
	}
	p.sb.beginSync()
	got, err := workspace.SyncFrom(&b, p.sb.plan.Workspace, p.sb.limits(), p.sb.syncable, p.base != nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := p.sb.took(got); err != nil {
		p.t.Fatal(err)
	}
	p.base = next
	return got
}

func newPodStream(t *testing.T, files map[string]string) *podStream {
	pod, ws := t.TempDir(), t.TempDir()
	known := map[string]bool{}
	for rel, body := range files {
		for _, root := range []string{pod, ws} {
			must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755))
			must(t, os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644))
		}
		for p := rel; p != "."; p = filepath.Dir(p) {
			known[p] = true
		}
	}
	sb := &podSandbox{plan: &contract.Plan{Workspace: ws, Mounts: []contract.Mount{
		{Path: ws, Type: contract.Bind, Access: contract.ReadWrite},
	}}}
	sb.remember(known, nil, nil) // the fill
	return &podStream{t: t, sb: sb, pod: pod}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Red team (sync of changes): a sync that writes a file anew in a directory (a new
// inode renamed over it) moves the host directory's times, but a sync of changes
// stamps anew only the paths its archive names, and the Pod's directory did not
// change (its file was rewritten in place): the host's directory then looks changed
// by the host for the rest of the session. A later `rm -r` of it in the Pod is taken
// for a conflict the host wins: refused at that command's sync and at the session's
// last (kept), so the Pod's removal never reaches the host nor the log.
func TestRedTeamSyncRewriteThenRemoveDirLost(t *testing.T) {
	p := newPodStream(t, map[string]string{"d/f.txt": "old"})
	p.round(false) // the session's first sync: whole
	// Command 1 rewrites d/f.txt in place: d itself is the same in the Pod.
	must(t, os.WriteFile(filepath.Join(p.pod, "d/f.txt"), []byte("new"), 0o644))
	if got := p.round(true); !got.Changes || got.Names["d"] {
		t.Fatalf("the sync after an in-place rewrite: changes %v, names %v", got.Changes, got.Names)
	}
	if b, _ := os.ReadFile(filepath.Join(p.sb.plan.Workspace, "d/f.txt")); string(b) != "new" {
		t.Fatalf("the rewrite did not come back: %q", b)
	}
	// Command 2 removes the directory.
	must(t, os.RemoveAll(filepath.Join(p.pod, "d")))
	got := p.round(true)
	if _, err := os.Lstat(filepath.Join(p.sb.plan.Workspace, "d")); err == nil {
		t.Errorf("the Pod's rm -r d did not reach the host at its command's sync (refused: %v)", got.RefusedPaths)
	}
	p.round(false) // the session's last: whole
	if _, err := os.Lstat(filepath.Join(p.sb.plan.Workspace, "d")); err == nil {
		t.Errorf("the Pod removed d, the host never changed it, and it is still on the host after the last sync (kept %v)", p.sb.kept)
	}
}

// The fix's other side: a directory the host did change (a chmod between commands)
// before a sync wrote in it stays the host's: the Pod's later removal of it is
// refused, as any conflict the host wins.
func TestRedTeamSyncHostDirChangeStaysKept(t *testing.T) {
	p := newPodStream(t, map[string]string{"d/f.txt": "old"})
	p.round(false)
	must(t, os.Chmod(filepath.Join(p.sb.plan.Workspace, "d"), 0o700)) // the host's change
	must(t, os.WriteFile(filepath.Join(p.pod, "d/f.txt"), []byte("new"), 0o644))
	p.round(true)
	must(t, os.RemoveAll(filepath.Join(p.pod, "d")))
	p.round(true)
	p.round(false)
	if fi, err := os.Lstat(filepath.Join(p.sb.plan.Workspace, "d")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the host's chmod of d was lost to the Pod's removal (%v)", err)
	}
}

// changesArchive is a hostile sidecar's archive of changes: files, each of size n.
func changesArchive(t *testing.T, n int, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"CORDON.pack": "changes"}, Format: tar.FormatPAX}))
	for _, name := range names {
		must(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(n), Format: tar.FormatPAX}))
		_, err := tw.Write(bytes.Repeat([]byte("x"), n))
		must(t, err)
	}
	must(t, tw.Close())
	return b.Bytes()
}

// Red team (sync of changes, the archive hostile): each archive of changes is
// bounded by workspaceBytes, and what they add up to by the entries (afterChanges),
// but not by the bytes: a sidecar that sends new files at every sync grows the host's
// workspace past workspaceBytes without end (a whole pack is bounded whole).
func TestRedTeamSyncChangesAddUpPastWorkspaceBytes(t *testing.T) {
	p := newPodStream(t, map[string]string{"a.txt": "a"})
	p.sb.cfg.WorkspaceBytes = 1 << 20
	p.round(false)
	ws := p.sb.plan.Workspace
	failed := false
	for i := range 4 {
		arc := changesArchive(t, 600<<10, fmt.Sprintf("grow%d.bin", i))
		p.sb.beginSync()
		got, err := workspace.SyncFrom(bytes.NewReader(arc), ws, p.sb.limits(), p.sb.syncable, true)
		if err == nil {
			err = p.sb.took(got)
		}
		if err != nil {
			failed = true
			break
		}
	}
	var total int64
	filepath.WalkDir(ws, func(_ string, d fs.DirEntry, _ error) error {
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	if !failed || total > 2*p.sb.limits().Bytes {
		t.Errorf("4 archives of changes of 600 KiB each with workspaceBytes 1 MiB: a sync failed %v; the host's workspace holds %d bytes", failed, total)
	}
}

// The bound's other side: a large file the host kept (it changed it while the Pod
// did too) is the host's, and does not count against what the Pod may bring back.
func TestRedTeamSyncKeptFileNotCounted(t *testing.T) {
	big := string(bytes.Repeat([]byte("b"), 700<<10))
	p := newPodStream(t, map[string]string{"big.bin": big})
	p.sb.cfg.WorkspaceBytes = 1 << 20
	p.round(false)
	must(t, os.WriteFile(filepath.Join(p.sb.plan.Workspace, "big.bin"), []byte(big+"host"), 0o644))
	must(t, os.WriteFile(filepath.Join(p.pod, "big.bin"), nil, 0o644)) // the Pod's: emptied
	p.round(true)
	must(t, os.WriteFile(filepath.Join(p.pod, "new.bin"), []byte(big), 0o644))
	p.round(true) // fails the test if the sync does: 700 KiB of the Pod's, 1 MiB allowed
}

// Red team (a sync that fails part way): the archive is streamed, so the entries
// before the failure are written on the host (a pack fails when a file changes size
// as it is read: a background writer can make one fail at will), but the sync's
// bookkeeping is skipped, so the host's copy of what it wrote looks changed by the
// host. If the Pod changes that file again before the retry, the retry takes it for a
// conflict the host wins: the Pod's later versions never reach the host.
func TestRedTeamSyncFailedPartWayPoisons(t *testing.T) {
	p := newPodStream(t, map[string]string{"a.txt": "v1"})
	p.round(false)
	ws := p.sb.plan.Workspace
	// The pack of the Pod's a.txt v2 and new.txt, cut short after them (the Pod's
	// zzz.txt changed size as it was read).
	arc := changesArchive(t, 2, "a.txt", "new.txt", "zzz.txt")
	arc = arc[:len(arc)-1024-511] // cut in zzz.txt's body: the stream failed there
	must(t, os.WriteFile(filepath.Join(p.pod, "a.txt"), []byte("xx"), 0o644))
	must(t, os.WriteFile(filepath.Join(p.pod, "new.txt"), []byte("xx"), 0o644))
	p.sb.beginSync()
	got, err := workspace.SyncFrom(bytes.NewReader(arc), ws, p.sb.limits(), p.sb.syncable, true)
	if err == nil {
		t.Fatal("an archive cut short synced without an error")
	}
	p.sb.failedSync(got)
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "xx" {
		t.Fatalf("the entries before the failure were not written: %q", b)
	}
	// Before the retry, the Pod changes both again; the retry takes the whole tree.
	must(t, os.WriteFile(filepath.Join(p.pod, "a.txt"), []byte("v3"), 0o644))
	must(t, os.WriteFile(filepath.Join(p.pod, "new.txt"), []byte("n3"), 0o644))
	p.round(false)
	p.round(false)
	for rel, want := range map[string]string{"a.txt": "v3", "new.txt": "n3"} {
		if b, _ := os.ReadFile(filepath.Join(ws, rel)); string(b) != want {
			t.Errorf("%s on the host after the retry and the last sync: %q, want the Pod's %q (kept %v)", rel, b, want, p.sb.kept)
		}
	}
}

// The fix's other side: a file the host changed before a sync that failed part way
// (refused there) stays the host's at the retry.
func TestRedTeamSyncFailedPartWayHostEditKept(t *testing.T) {
	p := newPodStream(t, map[string]string{"b.txt": "v1"})
	p.round(false)
	ws := p.sb.plan.Workspace
	must(t, os.WriteFile(filepath.Join(ws, "b.txt"), []byte("host"), 0o644))
	must(t, os.WriteFile(filepath.Join(p.pod, "b.txt"), []byte("xx"), 0o644))
	arc := changesArchive(t, 2, "b.txt", "zzz.txt")
	p.sb.beginSync()
	got, err := workspace.SyncFrom(bytes.NewReader(arc[:len(arc)-1024-511]), ws, p.sb.limits(), p.sb.syncable, true)
	if err == nil {
		t.Fatal("an archive cut short synced without an error")
	}
	p.sb.failedSync(got)
	p.round(false)
	if b, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(b) != "host" {
		t.Errorf("the host's edit of b.txt was lost after a failed sync and its retry: %q", b)
	}
}
