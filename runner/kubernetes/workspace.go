package kubernetes

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/trace"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/server/workspace"
)

// The workspace on the host is the session's: the runner diffs it after each command
// and logs the diff. The Pod's is a volume on its node. The backend fills the Pod's
// from the host's before the first command (without the plan's hidden paths) and,
// after each command, packs the Pod's whole and syncs the host's to it for the paths
// a command may write there. A difference anywhere else is never brought back: a
// command cannot make one (those paths are read-only or masked in the Pod), and the
// plan's placeholders (protected names the host lacks, empty in the Pod) differ by
// design.

// limits bounds a fill and a pack as the Pod's volume is bounded.
func (sb *podSandbox) limits() workspace.Limits {
	bytes := sb.cfg.WorkspaceBytes
	if bytes <= 0 {
		bytes = podspec.DefaultWorkspaceBytes
	}
	return workspace.Limits{Bytes: bytes, Entries: podspec.WorkspaceEntries}
}

// fill sends the host's workspace into the Pod's, before any command, and keeps the
// names it sent as what the Pod has. The caller holds syncMu.
func (sb *podSandbox) fill(ctx context.Context, ch *placement.Channel) error {
	if sb.plan.Workspace == "" {
		return nil
	}
	pr, pw := io.Pipe()
	go func() {
		_, _, err := workspace.PackOnly(pw, sb.plan.Workspace, sb.limits(), func(rel string) bool {
			return !sb.hidden(rel) && !sb.linkOut(rel)
		})
		pw.CloseWithError(err)
	}()
	names, tee := namesOf(pr)
	err := ch.Fill(ctx, tee)
	pr.CloseWithError(errors.New("the fill ended"))
	known, nerr := names()
	if err == nil {
		err = nerr
	}
	if err != nil {
		return fmt.Errorf("filling the Pod's workspace from %s: %w", sb.plan.Workspace, err)
	}
	sb.remember(known, nil, nil)
	return nil
}

// stamp is what a sync tells a host file the host changed by: the file as the last
// fill or sync left it.
// The change time is in it because file times are coarse (the kernel's tick): an
// edit of the same size within a tick of the last sync keeps the modification time,
// but any write, chmod or rename moves the change time, which no one can set back.
type stamp struct {
	ino, size    uint64
	mtime, ctime int64
	mode         fs.FileMode
}

func stampOf(fi fs.FileInfo) stamp {
	st := stamp{size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino, st.ctime = uint64(sys.Ino), ctimeOf(sys)
	}
	return st
}

// remember keeps the paths the Pod has now (known) and how each is on the host, but
// for the paths the host kept at a sync (keptNow, then kept): their stamp stays as it
// was before the host changed them, so they stay the host's at every later sync.
// touched (nil: every known path) is what the last sync took from the Pod, and gone
// what it removed: only their stamps are taken anew (a path the Pod did not change
// keeps its stamp, and with it any change the host made since).
func (sb *podSandbox) remember(known map[string]bool, touched map[string]bool, gone []string) {
	if sb.kept == nil {
		sb.kept = map[string]bool{}
	}
	for rel := range sb.keptNow {
		sb.kept[rel] = true
	}
	sb.keptNow = nil
	wroteIn := sb.wroteIn
	sb.wroteIn = nil
	sb.known = known
	if touched == nil {
		old := sb.stamps
		sb.stamps, sb.bytes = make(map[string]stamp, len(known)), 0
		for rel := range known {
			if st, ok := old[rel]; ok && sb.kept[rel] {
				sb.setStamp(rel, st)
			} else if !sb.kept[rel] {
				sb.restamp(rel)
			}
		}
		return
	}
	if len(gone) > 0 {
		for rel := range sb.stamps {
			if !known[rel] {
				sb.dropStamp(rel)
			}
		}
	}
	for rel := range touched {
		if !sb.kept[rel] {
			sb.restamp(rel)
		}
	}
	// A directory the sync wrote in moved on the host by the sync's own doing, though
	// the Pod's did not (a file rewritten in place there): unless the host had changed
	// it first, it is stamped anew, or a later change of it in the Pod (its removal)
	// would be taken for a conflict the host wins.
	for dir, hostsBefore := range wroteIn {
		if !hostsBefore && known[dir] && !sb.kept[dir] && !touched[dir] {
			sb.restamp(dir)
		}
	}
}

// restamp takes rel's stamp as it is on the host now.
func (sb *podSandbox) restamp(rel string) {
	if fi, err := os.Lstat(filepath.Join(sb.plan.Workspace, rel)); err == nil {
		sb.setStamp(rel, stampOf(fi))
	} else {
		sb.dropStamp(rel)
	}
}

// setStamp keeps st as rel's stamp, and sb.bytes the sum of the regular files' sizes.
func (sb *podSandbox) setStamp(rel string, st stamp) {
	sb.dropStamp(rel)
	sb.stamps[rel] = st
	if st.mode.IsRegular() {
		sb.bytes += int64(st.size)
	}
}

// dropStamp forgets rel's stamp.
func (sb *podSandbox) dropStamp(rel string) {
	if st, ok := sb.stamps[rel]; ok {
		if st.mode.IsRegular() {
			sb.bytes -= int64(st.size)
		}
		delete(sb.stamps, rel)
	}
}

// afterChanges makes known the paths the Pod has after a sync of its changes: those
// it had, less the ones it removed (with everything below them: one pass over known
// when the sync removed anything), and those the archive names. It fails past max
// paths: each archive of changes is bounded, and so must be what they add up to.
func (sb *podSandbox) afterChanges(got workspace.Synced, max int) error {
	if len(got.Removed) > 0 {
		gone := make(map[string]bool, len(got.Removed))
		for _, rel := range got.Removed {
			gone[rel] = true
		}
		for rel := range sb.known {
			if under(rel, gone) {
				delete(sb.known, rel)
			}
		}
	}
	for rel := range got.Names {
		sb.known[rel] = true
	}
	if len(sb.known) > max {
		return fmt.Errorf("the Pod's workspace has more than %d paths", max)
	}
	return nil
}

// under reports whether rel or a directory above it is in set.
func under(rel string, set map[string]bool) bool {
	if len(set) == 0 {
		return false
	}
	for p := rel; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if set[p] {
			return true
		}
	}
	return false
}

// hostChanged reports whether the host changed rel since the last fill or sync (made,
// changed or removed it).
func (sb *podSandbox) hostChanged(rel string) bool {
	was, had := sb.stamps[rel]
	fi, err := os.Lstat(filepath.Join(sb.plan.Workspace, rel))
	if err != nil {
		return had
	}
	return !had || stampOf(fi) != was
}

// namesOf tees r: what is read from the returned reader is also parsed as a tar, and
// names (to call once the reader was read to its end or abandoned) returns the
// entries' clean names.
func namesOf(r io.Reader) (names func() (map[string]bool, error), tee io.Reader) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	got := map[string]bool{}
	var perr error
	go func() {
		defer close(done)
		tr := tar.NewReader(pr)
		for {
			h, err := tr.Next()
			if err != nil {
				if err != io.EOF {
					perr = err
				}
				_, _ = io.Copy(io.Discard, pr) // the writer never blocks on us
				return
			}
			got[strings.TrimSuffix(path.Clean(h.Name), "/")] = true
		}
	}()
	return func() (map[string]bool, error) {
		pw.Close()
		<-done
		return got, perr
	}, io.TeeReader(r, pw)
}

// sync brings the Pod's workspace back into the host's, for the paths a command may
// write. Once a sync took a pack whole, the next takes only what changed since
// (placement's PackChanges, server/workspace.PackChanges): its cost is what the
// commands changed, not what the workspace holds. whole reads the whole workspace
// all the same (the last sync): a file written through a shared memory mapping
// whose pages were already dirty keeps its times, so only a whole pack is sure to
// see it; before that it is brought back by the first sync that sees it change.
func (sb *podSandbox) sync(ctx context.Context, ch *placement.Channel, whole bool) error {
	if sb.plan.Workspace == "" {
		return nil
	}
	sb.syncMu.Lock()
	defer sb.syncMu.Unlock()
	changes := sb.inStep && !whole
	sb.inStep = false // until this sync took the pack whole
	sb.beginSync()
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		pack := ch.Pack
		if changes {
			pack = ch.PackChanges
		}
		err := pack(ctx, pw)
		pw.CloseWithError(err)
		packed <- err
	}()
	began := time.Now()
	got, err := workspace.SyncFrom(pr, sb.plan.Workspace, sb.limits(), sb.syncable, changes)
	if got.Changes {
		trace.Add("kubernetes.sync.changes", began, time.Now()) // the Pod sent only what changed
	} else {
		trace.Add("kubernetes.sync.whole", began, time.Now())
	}
	pr.CloseWithError(errors.New("the sync ended"))
	if perr := <-packed; err == nil && perr != nil {
		err = perr
	}
	if err == nil {
		err = sb.took(got)
	} else {
		sb.failedSync(got)
	}
	if err != nil {
		return fmt.Errorf("bringing the Pod's workspace back to %s: %w", sb.plan.Workspace, err)
	}
	sb.inStep = true
	return nil
}

// failedSync keeps what a sync that failed part way wrote (got: the entries it read;
// the archive is streamed, so those were synced): they are the Pod's paths, and the
// host's copies as the sync left them are stamped, as after a sync that succeeded.
// Else the next sync, whole, would take the failed one's writes for the host's own
// changes and keep them over the Pod's. What it refused (keptNow) the next decides
// again; what it would have removed it did not.
func (sb *podSandbox) failedSync(got workspace.Synced) {
	if sb.known == nil || sb.stamps == nil {
		return // before the fill: nothing to keep
	}
	touched := make(map[string]bool, len(got.Names))
	for rel := range got.Names {
		if !sb.keptNow[rel] {
			touched[rel] = true
			sb.known[rel] = true
		}
	}
	sb.keptNow = nil
	sb.remember(sb.known, touched, nil)
}

// took keeps what a sync that succeeded brought back (got): the paths the Pod has
// and the host's stamps of them.
func (sb *podSandbox) took(got workspace.Synced) error {
	if !got.Changes {
		sb.remember(got.Names, nil, nil)
		return nil
	}
	lim := sb.limits()
	if err := sb.afterChanges(got, lim.Entries); err != nil {
		return err
	}
	sb.remember(sb.known, got.Names, got.Removed)
	// Each archive of changes is bounded, and so must be what they add up to: the
	// files the Pod brought back, by their sizes on the host (a whole pack is bounded
	// whole). The paths the host kept are the host's: their size is not the Pod's.
	bytes := sb.bytes
	for rel := range sb.kept {
		if st, ok := sb.stamps[rel]; ok && st.mode.IsRegular() {
			bytes -= int64(st.size)
		}
	}
	if bytes > lim.Bytes {
		return fmt.Errorf("the Pod's workspace holds more than %d bytes", lim.Bytes)
	}
	return nil
}

// syncable is what a sync may change of the host's workspace: a path a command may
// write that the host did not change since the last fill or sync. A path the Pod had
// then: the Pod's change or removal comes back unless the host changed or removed it
// meanwhile (an edit made between two commands, or during one, is the host's and is
// kept). A path the Pod did not have: the Pod made it, unless the host made one too.
// When both changed a file, the host's is kept and the Pod's change is not brought
// back, at this sync and every later one of the session (remember): the Pod keeps
// its version, and a later sync would otherwise take the host's as the last agreed
// state and bring the Pod's stale copy back over it.
func (sb *podSandbox) syncable(rel string) bool {
	if !sb.writable(rel) {
		return false
	}
	if sb.kept[rel] {
		return false
	}
	ok := false
	if sb.known[rel] {
		ok = !sb.hostChanged(rel)
	} else {
		_, err := os.Lstat(filepath.Join(sb.plan.Workspace, rel))
		ok = errors.Is(err, fs.ErrNotExist)
	}
	if !ok && sb.keptNow != nil {
		sb.keptNow[rel] = true
	}
	if d := path.Dir(rel); ok && d != "." && sb.wroteIn != nil {
		if _, seen := sb.wroteIn[d]; !seen {
			sb.wroteIn[d] = sb.hostChanged(d)
		}
	}
	return ok
}

// beginSync readies the bookkeeping of a sync (syncable's): the caller holds syncMu.
func (sb *podSandbox) beginSync() {
	sb.keptNow, sb.wroteIn = map[string]bool{}, map[string]bool{}
}

// mountOf is the plan's innermost mount at rel (a path below the workspace), or nil.
func (sb *podSandbox) mountOf(rel string) *contract.Mount {
	abs := filepath.Join(sb.plan.Workspace, rel)
	var best *contract.Mount
	for i := range sb.plan.Mounts {
		m := &sb.plan.Mounts[i]
		if (abs == m.Path || strings.HasPrefix(abs, m.Path+"/")) && (best == nil || len(m.Path) > len(best.Path)) {
			best = m
		}
	}
	return best
}

// writable reports whether a command may write rel in the workspace: its innermost
// mount is a read-write bind.
func (sb *podSandbox) writable(rel string) bool {
	m := sb.mountOf(rel)
	return m != nil && m.Type == contract.Bind && m.Access == contract.ReadWrite
}

// linkOut reports whether rel is a symbolic link whose target leaves the workspace
// (absolute, or up past its root): it means nothing in the Pod, whose file system is
// not this host's, and a fill refuses it; it stays on the host only.
func (sb *podSandbox) linkOut(rel string) bool {
	t, err := os.Readlink(filepath.Join(sb.plan.Workspace, rel))
	if err != nil {
		return false
	}
	if filepath.IsAbs(t) {
		return true
	}
	j := filepath.Join(filepath.Dir(rel), t)
	return j == ".." || strings.HasPrefix(j, "../")
}

// hidden reports whether rel is masked from commands (deny_read): it stays on the host.
func (sb *podSandbox) hidden(rel string) bool {
	m := sb.mountOf(rel)
	return m != nil && m.Type == contract.Mask
}
