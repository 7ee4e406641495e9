package runner

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cordonhq/cordon/internal/linux"
)

// liveWatch disarms the git repositories a command makes the moment the kernel creates
// them, rather than when the command ends: a git the host runs in that directory
// meanwhile (an editor's, polling) would obey it. It watches the workspace's file
// system with fanotify, which needs root; without it the end-of-command quarantine
// alone remains, and the window is the command's run time.
type liveWatch struct {
	w    *linux.CreateWatch
	wg   sync.WaitGroup
	mu   sync.Mutex
	done []string // disarmed, not yet in a diff; guarded by mu
}

// repoNames are the names whose creation can complete a git repository.
var repoNames = map[string]bool{".git": true, "HEAD": true, "objects": true, "refs": true}

// watchRepositories starts the live watch, when cordon may.
func (r *run) watchRepositories() {
	if os.Geteuid() != 0 {
		return
	}
	// A directory moved into place may be a whole repository prepared elsewhere.
	w, err := linux.WatchCreates(r.plan.Workspace, func(name string, movedDir bool) bool { return movedDir || repoNames[name] })
	if err != nil {
		r.o.Log.Debug("no live quarantine of new git repositories", "err", err)
		return
	}
	lw := &liveWatch{w: w}
	r.live = lw
	lw.wg.Add(1)
	go func() {
		defer lw.wg.Done()
		for c := range w.Events() {
			if c.Overflow {
				r.o.Log.Warn("the live watch for new git repositories lost events; the end-of-command sweep still runs")
				continue
			}
			if rel := r.liveTarget(c); rel != "" && r.disarm(rel) {
				lw.mu.Lock()
				lw.done = append(lw.done, rel)
				lw.mu.Unlock()
			}
		}
	}()
}

// liveTarget is what to disarm for a created entry, workspace-relative, or "".
func (r *run) liveTarget(c linux.Created) string {
	rel, err := filepath.Rel(r.plan.Workspace, c.Dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	rel = filepath.ToSlash(rel)
	if rel == "." {
		return "" // the workspace's own .git, HEAD: the contract protects them
	}
	if rel == ".git" || strings.HasPrefix(rel, ".git/") {
		return ""
	}
	var target string
	switch {
	case c.Name == ".git":
		target = path.Join(rel, ".git")
	case repoNames[c.Name]: // HEAD, objects, refs: a bare repository once all three are there
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

// stopWatch stops the live watch.
func (r *run) stopWatch() {
	if r.live == nil {
		return
	}
	r.live.w.Close()
	r.live.wg.Wait()
}
