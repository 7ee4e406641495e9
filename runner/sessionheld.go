package runner

import "github.com/cordonhq/cordon/audit/fsdiff"

// A process of a session's sandbox that outlives a take of the change set (left in
// the background by a command, or a command still running) may hold a file mapped
// shared and writable. Once it has written a page of the mapping, its later writes to
// that page fault no more: they change the file with no event and no change of its
// stat data, which a walk trusts. So every file of a set taken while such a process
// was alive is held: each snapshot reads it again whatever its stat data say, until
// one is taken after a take with no process left (which reads them one last time).
// Opens are recorded whenever a process may run, so a file such a process opens is in
// a set. A set that could not be trusted, one naming a file by its identity alone, or
// more held files than maxHeld make every file held.

// maxHeld bounds the held paths; past it every file is.
const maxHeld = 1 << 14

// heldFiles are the files a live process may hold mapped; guarded by run.wsMu.
type heldFiles struct {
	paths map[string]bool // path → everything below it (a name made there)
	all   bool
}

// add holds the paths of a set taken while a process may outlive the take; untrusted
// says the set lost some.
func (h *heldFiles) add(set fsdiff.Watched, untrusted string) {
	if untrusted != "" || len(set.Objects) > 0 || len(h.paths)+len(set.Paths) > maxHeld {
		h.all, h.paths = true, nil
	}
	if h.all {
		return
	}
	if h.paths == nil {
		h.paths = make(map[string]bool, len(set.Paths))
	}
	for _, p := range set.Paths {
		h.paths[p.Path] = h.paths[p.Path] || p.Deep
	}
}

// reread is what a snapshot reads again.
func (h *heldFiles) reread() fsdiff.Reread {
	if h.all {
		return fsdiff.Reread{All: true}
	}
	rr := fsdiff.Reread{Paths: make([]fsdiff.ChangedPath, 0, len(h.paths))}
	for p, deep := range h.paths {
		rr.Paths = append(rr.Paths, fsdiff.ChangedPath{Path: p, Deep: deep})
	}
	return rr
}

func (h *heldFiles) clear() { h.paths, h.all = nil, false }
