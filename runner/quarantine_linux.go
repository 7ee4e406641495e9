package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/internal/trace"
)

// liveWatch disarms the git repositories a command makes the moment the kernel creates
// them, rather than when the command ends: a git the host runs in that directory
// meanwhile (an editor's, polling) would obey it. It watches the workspace's file
// system with fanotify, which needs root; without it the end-of-command quarantine
// alone remains, and the window is the command's run time.
type liveWatch struct {
	w      *linux.CreateWatch
	wg     sync.WaitGroup
	closed chan struct{} // closed once w is
	mu     sync.Mutex
	done   []string // disarmed, not yet in a diff; guarded by mu
	taken  bool     // takeChanges has taken the change set; guarded by mu
	// handled counts the events handled; progress is signalled after each.
	handled  atomic.Uint64
	progress chan struct{}
	// fdMu guards the fields below: Unmark may not follow Close.
	fdMu     sync.Mutex
	closing  bool
	unmarked bool
}

// close begins closing the watch and returns at once. Closing a fanotify group
// whose mark is still there waits for the kernel to retire it (an SRCU grace period:
// 5-16 ms on the 2-core VM of the benchmarks), which nothing of the run waits for but
// the very end of its teardown (waitWatchClosed); unmark, called earlier, spares most
// of that wait.
func (lw *liveWatch) close() {
	lw.fdMu.Lock()
	defer lw.fdMu.Unlock()
	if lw.closing {
		return
	}
	lw.closing = true
	go func() {
		lw.w.Close()
		close(lw.closed)
	}()
}

// unmark removes the watch's mark, so that the kernel retires it while the run's
// diff and teardown go on, and close, later, finds nothing left to wait for. Nothing
// made after it is reported; the caller calls it once nothing of the sandbox is left.
func (lw *liveWatch) unmark() error {
	lw.fdMu.Lock()
	defer lw.fdMu.Unlock()
	if lw.closing || lw.unmarked {
		return nil
	}
	lw.unmarked = true
	return lw.w.Unmark()
}

// repoNames are the names whose creation can complete a git repository.
var repoNames = map[string]bool{".git": true, "HEAD": true, "objects": true, "refs": true, "commondir": true}

// watched are the names the live watch resolves: those, and contracts.
func watched(name string, movedDir bool) bool {
	return movedDir || repoNames[name] || name == contract.ContractName
}

// mayWatch reports whether watchRepositories will try to watch the workspace: the
// owner record says so from its write with the placeholders (runDir.placeholders),
// before the watch starts.
func mayWatch() bool { return os.Geteuid() == 0 }

// watchRepositories starts the live watch, when cordon may. No other live run's
// workspace is inside this one's (lockWorkspace): the placeholders it makes would be
// new entries to the watch.
func (r *run) watchRepositories() error {
	if !mayWatch() {
		r.noChanges("not root: no fanotify watch of the workspace")
		return nil
	}
	// A directory moved into place may be a whole repository prepared elsewhere. An
	// entry made, moved or written at a mask's name may be the sandbox's, once the
	// mask went (maskBroken).
	masked := r.maskNames()
	w, err := r.watchFor(func(name string, movedDir bool) bool { return watched(name, movedDir) || masked[name] })
	if err != nil {
		r.noChanges("no fanotify watch: " + err.Error())
		r.o.Log.Debug("no live quarantine of new git repositories", "err", err)
		return nil
	}
	lw := &liveWatch{w: w, closed: make(chan struct{}), progress: make(chan struct{}, 1)}
	r.live = lw
	lw.wg.Add(1)
	go func() {
		defer lw.wg.Done()
		for c := range w.Events() {
			lw.handle(r, c)
		}
	}()
	return nil
}

// handle disarms what the created entry c completes, if anything, and counts c as
// handled (changeset_linux.go waits for the count).
func (lw *liveWatch) handle(r *run, c linux.Created) {
	defer lw.handledOne()
	if c.Overflow {
		r.o.Log.Warn("the live watch for new git repositories lost events; the end-of-command sweep still runs")
		// An event it lost may have been the sandbox's write where a mask was: every
		// mask is looked at now.
		ws := filepath.Clean(r.plan.Workspace)
		if rel := r.maskBroken(linux.Created{Dir: filepath.Dir(ws), Name: filepath.Base(ws)}); rel != "" {
			lw.maskGone(r, rel)
		}
		return
	}
	if rel := r.maskBroken(c); rel != "" {
		lw.maskGone(r, rel)
		return
	}
	if rel := r.liveTarget(c); rel != "" && r.disarm(rel) {
		lw.mu.Lock()
		lw.done = append(lw.done, rel)
		lw.mu.Unlock()
	}
}

// maskNames are the base names of the run's masks (maskBroken): the live watch
// resolves an entry of one of them to check it.
func (r *run) maskNames() map[string]bool {
	names := map[string]bool{}
	if r.rd == nil {
		return names
	}
	for p := range r.masks {
		// The mask's own name, and those of the directories above it in the
		// workspace: a link or a directory put there brings an entry at its path.
		for ; p != r.plan.Workspace && len(p) > len(r.plan.Workspace); p = filepath.Dir(p) {
			names[filepath.Base(p)] = true
		}
	}
	return names
}

// maskGone stops the run, every command of it now and later, once the live watch has
// seen the mask at rel gone (maskBroken), and renames aside what stands there.
func (lw *liveWatch) maskGone(r *run, rel string) {
	r.stopAll(&maskKill{rel: rel})
	r.masksMu.Lock()
	r.saidMaskLocked(filepath.Join(r.plan.Workspace, filepath.FromSlash(rel)))
	r.masksMu.Unlock()
	r.qMu.Lock()
	to, err := disarmMask(r.plan.Workspace, rel)
	r.qMu.Unlock()
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(r.o.Stderr, "cordon: warning: what stands at %s, where the sandbox's mask was, could not be renamed aside: %s\n", termtext.Line(rel), termtext.Line(err.Error()))
		}
		return
	}
	fmt.Fprintf(r.o.Stderr, "cordon: renamed what stands at %s, where the sandbox's mask was, to %s so that no host tool obeys it\n", termtext.Line(rel), termtext.Line(to))
	lw.mu.Lock()
	lw.done = append(lw.done, to)
	lw.mu.Unlock()
}

// maskBroken is the workspace-relative path of one of the run's masks (a placeholder
// or one of the workspace's own masked entries) when the live watch reports c, an
// entry made, moved or written there or above it (a directory moved into place may
// bring an entry at a mask's path with it), and what stands there now is not the
// entry the mask was put on: the mask went with the entry it was on, so the sandbox
// may have made this one. "" otherwise (a write the host makes to the masked entry
// itself).
func (r *run) maskBroken(c linux.Created) string {
	if r.rd == nil || c.Dir == "" {
		return ""
	}
	p := filepath.Join(c.Dir, c.Name)
	if rel, err := filepath.Rel(r.plan.Workspace, p); err != nil || !filepath.IsLocal(rel) {
		return ""
	}
	for m, id := range r.masks {
		if m != p && !strings.HasPrefix(m, p+"/") {
			continue
		}
		now, err := linux.Identify(m)
		if errors.Is(err, fs.ErrNotExist) || err == nil && sameEntry(now, id) {
			continue // gone (the command's end says so), or the entry the mask is on
		}
		rel, _ := filepath.Rel(r.plan.Workspace, m)
		return filepath.ToSlash(rel)
	}
	return ""
}

// liveTarget is what to disarm for a created entry, workspace-relative, or "".
func (r *run) liveTarget(c linux.Created) string {
	rel, err := filepath.Rel(r.plan.Workspace, c.Dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	rel = filepath.ToSlash(rel)
	if rel == "." && (c.Name == ".git" || c.Name == contract.ContractName) {
		return "" // the workspace's own .git and cordon.yaml: the contract protects them
	}
	if rel == ".git" || strings.HasPrefix(rel, ".git/") {
		return ""
	}
	var target string
	switch {
	case c.Name == ".git", c.Name == contract.ContractName:
		target = path.Join(rel, c.Name)
	case repoNames[c.Name]: // HEAD, objects, refs, commondir: a repository's HEAD (isBare)
		if !r.bareRepository(rel) {
			return ""
		}
		target = path.Join(rel, "HEAD")
	case r.bareRepository(path.Join(rel, c.Name)): // a directory moved into place
		target = path.Join(rel, c.Name, "HEAD")
	default:
		return ""
	}
	if insideGitDir(target) {
		return ""
	}
	return target
}

// takeLive returns what the live watch disarmed since the last call.
func (r *run) takeLive() []string {
	if r.live == nil {
		return nil
	}
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	out := r.live.done
	r.live.done = nil
	return out
}

// stopWatch stops the live watch: once it returns, the watch reads and disarms
// nothing more (its reader ends only after the last events it read are handled). The
// kernel's part of closing it may still be under way: waitWatchClosed waits for it.
func (r *run) stopWatch() {
	if r.live == nil {
		return
	}
	r.live.close()
	r.live.wg.Wait()
}

// stopWatchSoon removes the live watch's mark once nothing of the sandbox is left to
// make a repository: the kernel retires it beside the command's diff, the log's last
// lines and teardown, and closing the watch (stopWatch, in teardown) then hardly waits.
// What the watch had queued is still read until then.
func (r *run) stopWatchSoon() {
	if r.live == nil {
		return
	}
	if err := r.live.unmark(); err != nil {
		r.o.Log.Debug("removing the live watch's mark", "err", err)
		r.live.close() // the kernel's part of closing overlaps the diff instead
	}
}

// waitWatchClosed waits until the live watch's descriptor is closed, if it had one.
func (r *run) waitWatchClosed() {
	if r.live != nil {
		defer trace.Begin("watch.closed").End()
		r.live.close()
		<-r.live.closed
	}
}

// maxSweep bounds the directories sweepRepositories looks at, and maxSweepDepth how
// deep it goes (each level holds a directory open).
const (
	maxSweep      = 2_000_000
	maxSweepDepth = 512
)

// sweepRepositories disarms, in the workspace ws, every git repository other than the
// workspace's own (a nested .git, or a bare one) that was made or whose configuration,
// commondir or hooks changed, and every cordon.yaml below the root written, at or after
// since (by change time, which no process can
// set back): what a run whose cordon was killed before its last sweep left armed. It
// returns the paths it renamed.
//
// It runs when a diff stopped at a bound, so the workspace may hold millions of names
// in one directory: it reads each directory a batch at a time, keeping none of its
// names (not sorted, as filepath.WalkDir would), so its memory does not grow with a
// directory's size.
func sweepRepositories(ws string, since int64) []string {
	s := &sweeper{ws: ws, since: since}
	if isBare(ws) {
		if changedSince(ws, since, "HEAD", "config", "hooks") {
			s.disarm("HEAD")
		}
		return s.out
	}
	// Never a link at its name, nor anything but a directory, nor a wait: gc sweeps a
	// dead run's workspace, whose parent its owner's processes may write, and a fifo
	// put in its place would block gc, and every run that starts with it, for good.
	f, err := os.OpenFile(ws, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	s.dir(f, ".", 0)
	return s.out
}

type sweeper struct {
	ws    string
	since int64
	dirs  int
	out   []string
}

// dir sweeps the open directory d (rel to the workspace) and closes it; it returns
// false when the sweep is to stop.
func (s *sweeper) dir(d *os.File, rel string, depth int) bool {
	defer d.Close()
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if !s.entry(d, rel, e, depth) {
				return false
			}
		}
		if err != nil {
			return true
		}
	}
}

// entry sweeps the entry e of the directory d (rel to the workspace).
func (s *sweeper) entry(d *os.File, rel string, e fs.DirEntry, depth int) bool {
	name := e.Name()
	crel := path.Join(rel, name)
	p := filepath.Join(s.ws, filepath.FromSlash(crel))
	if !e.IsDir() {
		switch {
		case name == contract.ContractName && rel != "." && changedSince(p, s.since, ""):
			s.disarm(crel)
		case name == ".git" && changedSince(p, s.since, "", "config", "commondir", "hooks"):
			s.disarm(crel)
		}
		return true
	}
	if s.dirs++; s.dirs > maxSweep {
		return false
	}
	switch {
	case crel == ".git" || strings.HasSuffix(name, quarantineSuffix):
	case name == ".git":
		if changedSince(p, s.since, "", "config", "commondir", "hooks") {
			s.disarm(crel)
		}
	case isBare(p):
		if changedSince(p, s.since, "HEAD", "config", "hooks") {
			s.disarm(path.Join(crel, "HEAD"))
		}
	case depth < maxSweepDepth:
		fd, err := linux.OpenDirAt(int(d.Fd()), name)
		if err != nil {
			return true
		}
		return s.dir(os.NewFile(uintptr(fd), p), crel, depth+1)
	}
	return true
}

func (s *sweeper) disarm(rel string) {
	if to, err := disarmPath(s.ws, rel); err == nil {
		s.out = append(s.out, to)
	}
}

// changedSince reports whether dir/name, for any of names ("" is dir itself), changed
// at or after since.
func changedSince(dir string, since int64, names ...string) bool {
	for _, n := range names {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ctim.Nano() >= since {
			return true
		}
	}
	return false
}
