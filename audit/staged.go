package audit

import (
	"slices"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// stagedView is what became of a staged run's changes (cordon run --stage): each path
// its commands changed, and whether the stage lines after the seal (stage.apply,
// stage.discard) landed it, refused it, dropped it, or left it pending.
type stagedView struct {
	Paths []stagedPath
	Lines []noteView // the stage lines, in order
	// Pending counts the changes still staged: the last stage line's count, or, before
	// any, the paths the diffs name.
	Pending int
}

// stagedPath is one changed path of a staged run and its state.
type stagedPath struct {
	Path   string
	Op     string    // the diff's op ("added", "deleted", …)
	Status string    // "pending", "applied", "applied over a conflict", "refused", "discarded"
	Why    string    // why it was refused
	When   time.Time // the stage line that decided it; zero while pending
	By     string
}

// Statuses a staged path can have.
const (
	stagedPending   = "pending"
	stagedApplied   = "applied"
	stagedForced    = "applied over a conflict"
	stagedRefused   = "refused"
	stagedDiscarded = "discarded"
)

// addStage takes one stage line: the timeline note, and its body for the paths.
func (v *view) addStage(r Record) error {
	n, err := note(r)
	if v.stage == nil {
		v.stage = &stagedView{}
	}
	v.stage.Lines = append(v.stage.Lines, n)
	if err != nil {
		return err
	}
	var b event.StageBody
	if err := r.DecodeBody(&b); err != nil {
		return err
	}
	v.stageLines = append(v.stageLines, stageLine{r.Type, r.TS, b})
	return nil
}

// stageLine is a decoded stage line.
type stageLine struct {
	Type event.Type
	TS   time.Time
	Body event.StageBody
}

// Staged is the staged panel, or nil when the run was not staged.
func (v *view) Staged() *stagedView {
	if (v.End == nil || !v.End.Staged) && v.stage == nil {
		return nil
	}
	sv := v.stage
	if sv == nil {
		sv = &stagedView{}
	}
	sv.Paths = v.stagedPaths()
	known := map[string]bool{}
	for _, p := range sv.Paths {
		for c := p.Path; c != ""; c = parentOf(c) {
			known[c] = true
		}
	}
	for _, l := range v.stageLines {
		refused := make([][2]string, 0, len(l.Body.Refused))
		for _, r := range l.Body.Refused {
			path, why := splitRefused(r, known)
			refused = append(refused, [2]string{path, why})
		}
		for i := range sv.Paths {
			if sv.Paths[i].Status == stagedPending {
				decide(&sv.Paths[i], l, refused)
			}
		}
	}
	sv.Pending = 0
	for _, p := range sv.Paths {
		if p.Status == stagedPending {
			sv.Pending++
		}
	}
	if n := len(v.stageLines); n > 0 {
		sv.Pending = v.stageLines[n-1].Body.Pending
	}
	return sv
}

// stagedPaths are the paths the run's diffs leave changed, in the order first
// changed, each once with its net op: every fs.diff counts, a command's or one between
// commands (a session's background writes, a rollback's), so that a file added and
// then deleted again, or rolled back away, is not listed.
func (v *view) stagedPaths() []stagedPath {
	op := map[string]string{}
	var order []string
	set := func(path, o string) {
		if _, ok := op[path]; !ok {
			order = append(order, path)
		}
		op[path] = o
	}
	for _, d := range v.diffs {
		for _, f := range d.Changes {
			if f.OldPath != "" {
				netChange(op, set, f.OldPath, "deleted")
			}
			netChange(op, set, f.Path, f.Op)
		}
	}
	out := make([]stagedPath, 0, len(order))
	for _, p := range order {
		if o := op[p]; o != "" {
			out = append(out, stagedPath{Path: p, Op: o, Status: stagedPending})
		}
	}
	return out
}

// netChange folds a change of path (op as a diff says it; a rename's new path is
// "renamed") into what the path's changes add up to since the run started: "" when
// nothing (added, then deleted).
func netChange(op map[string]string, set func(path, op string), path, o string) {
	was := op[path]
	switch {
	case o == "deleted" && was == "added":
		set(path, "")
	case o == "deleted":
		set(path, "deleted")
	case was == "added":
		// still new since the start
	case was == "deleted" || was == "modified":
		set(path, "modified")
	case was == "" && o == "renamed":
		set(path, "added")
	default:
		set(path, o)
	}
}

// decide sets p's state from stage line l when l names it: a path landed is applied
// (or applied over a conflict), one refused is refused with the reason, and a discard
// drops whatever is still pending. A path lands with the directory that holds it.
func decide(p *stagedPath, l stageLine, refused [][2]string) {
	b := l.Body
	switch {
	case l.Type == event.StageDiscard:
		p.Status = stagedDiscarded
	case underAny(p.Path, b.Paths):
		p.Status = stagedApplied
		if slices.Contains(b.Conflicts, p.Path) {
			p.Status = stagedForced
		}
	default:
		for _, r := range refused {
			if path := r[0]; path == p.Path || strings.HasPrefix(p.Path, path+"/") {
				p.Status, p.Why = stagedRefused, r[1]
				break
			}
		}
	}
	if p.Status != stagedPending {
		p.When, p.By = l.TS, b.By
	}
}

// underAny reports whether path is one of dirs or lies below one.
func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// splitRefused splits a refused entry, "path: why". The sandbox chose the path and so
// may have put ": " in it: the path is the longest of known (the diffs' paths and
// their parents) that the entry starts with, else what comes before the first ": ".
func splitRefused(r string, known map[string]bool) (path, why string) {
	for i := len(r) - 2; i > 0; i-- {
		if r[i] == ':' && r[i+1] == ' ' && known[r[:i]] {
			return r[:i], r[i+2:]
		}
	}
	path, why, _ = strings.Cut(r, ": ")
	return path, why
}

// parentOf is a slash path's parent, "" at the top.
func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}
