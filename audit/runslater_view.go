package audit

import (
	"fmt"
	"strings"

	"github.com/cordonhq/cordon/audit/fsdiff"
)

// RunsLaterFile is one flagged change in a run's log: a file that build or CI tooling
// runs later, outside the sandbox (see [Classify]). `cordon audit show --json` lists
// them under "runs_later".
type RunsLaterFile struct {
	Cmd     string `json:"cmd,omitempty"`              // the command whose fs.diff holds the change
	Between bool   `json:"between_commands,omitempty"` // changed outside any command's diff (see [FSDiff.Between])
	Op      string `json:"op"`                         // as in [FileChange]
	Path    string `json:"path"`                       // slash-separated, relative to the workspace
	OldPath string `json:"old_path,omitempty"`         // for "renamed"
	// Files, when set, is how many changed files under the directory Path (ending in
	// "/": node_modules, .venv) the entry stands for; Op is theirs if they share one,
	// else "modified".
	Files    int      `json:"files,omitempty"`
	Category Category `json:"category"` // "ci", "build", "package-scripts", "dependencies" or "hooks"
	Reason   string   `json:"reason"`   // what the file is and what runs it
}

// RunsLater returns the runs-later files of a run's records (as [ReadEvents] returns
// them), in log order. The flags are computed from each fs.diff's changes and inline
// patch, so they need nothing the log does not hold, and logs written before flags
// existed get them too.
func RunsLater(recs []Record) []RunsLaterFile {
	v := buildView(recs)
	out := make([]RunsLaterFile, len(v.Later))
	for i, l := range v.Later {
		out[i] = l.RunsLaterFile
	}
	return out
}

// laterView is a runs-later file as the renderers show it.
type laterView struct {
	RunsLaterFile
	Argv   []string // the command's, when Cmd is set
	Anchor string   // the HTML id of the file's row in its command ("outside" between commands)
	Patch  string   // the file's part of the patch; "" when the log's inline patch lacks it
}

// flagDiff classifies the changes of d, recorded for command c (nil for changes
// between commands), and adds those flagged to v.Later and c.
func (v *view) flagDiff(c *cmdView, d *FSDiff) {
	if c != nil {
		c.later = nil // a second fs.diff for the command replaces the first
	}
	secs := patchSections(d)
	var group *laterView // the entry of the directory being grouped
	for i, fc := range d.Changes {
		sec := ""
		if i < len(secs) {
			sec = secs[i]
		}
		f, ok := classify(fsdiffOps[fc.Op], fc.Path, fc.OldPath, logTexts(fc, sec))
		if !ok {
			continue
		}
		l := group
		if f.group == "" || group == nil || group.Path != f.group {
			l = newLater(c, i, fc, f, sec)
			v.Later = append(v.Later, l)
			group = nil
			if f.group != "" {
				group = l
			}
		} else {
			l.Files++
			l.Patch = ""
			if l.Op != fc.Op {
				l.Op = "modified"
			}
		}
		if c != nil {
			if c.later == nil {
				c.later = make(map[int]*laterView)
			}
			c.later[i] = l
		}
	}
}

// newLater makes the entry of the i-th change of command c's diff (c is nil between
// commands), or of the directory group it opens.
func newLater(c *cmdView, i int, fc FileChange, f Flag, sec string) *laterView {
	l := &laterView{Patch: sec, Anchor: "outside", RunsLaterFile: RunsLaterFile{
		Op: fc.Op, Path: fc.Path, OldPath: fc.OldPath, Category: f.Category, Reason: f.Reason}}
	if f.group != "" {
		l.Path, l.OldPath, l.Files = f.group, "", 1
	}
	if c == nil {
		l.Between = true
	} else {
		l.Cmd, l.Argv, l.Anchor = c.ID, c.Start.Argv, fileAnchor(c.ID, i)
	}
	return l
}

var fsdiffOps = map[string]fsdiff.Op{
	"added": fsdiff.Added, "deleted": fsdiff.Deleted, "modified": fsdiff.Modified, "renamed": fsdiff.Renamed,
	"touched": fsdiff.Touched,
}

func fileAnchor(cmd string, i int) string { return fmt.Sprintf("cmd-%s-f%d", cmd, i) }

// Later returns the runs-later flag of the command's i-th changed file, or nil.
func (c *cmdView) Later(i int) *laterView { return c.later[i] }

// FileAnchor returns the HTML id of the command's i-th changed file.
func (c *cmdView) FileAnchor(i int) string { return fileAnchor(c.ID, i) }

// patchSections splits d's inline patch into one part per changed file, in the order
// of d.Changes (fsdiff writes a "diff --git" line for every change; a content line
// never starts with one, it starts with "+", "-", " " or "\"). The last part of a cut
// patch is incomplete, so it is left out.
func patchSections(d *FSDiff) []string {
	var secs []string
	start := -1
	for i := 0; i < len(d.Patch); {
		if strings.HasPrefix(d.Patch[i:], "diff --git ") {
			if start >= 0 {
				secs = append(secs, d.Patch[start:i])
			}
			start = i
		}
		n := strings.IndexByte(d.Patch[i:], '\n')
		if n < 0 {
			break
		}
		i += n + 1
	}
	if start >= 0 && !d.PatchTruncated {
		secs = append(secs, d.Patch[start:])
	}
	return secs
}

// logTexts is what the log says of a changed file's content: its part of the patch,
// with a side taken as whole when the lines shown from line 1 on add up to its size
// (a small file, or a change that the context lines cover).
func logTexts(fc FileChange, sec string) texts {
	if sec == "" {
		return texts{old: unknownSide(), new: unknownSide()}
	}
	t := parseSection(sec)
	for _, s := range []struct {
		side *side
		size int64
	}{{&t.old, fc.OldSize}, {&t.new, fc.NewSize}} {
		if s.side.known && !s.side.whole && len(s.side.lines) > 0 &&
			s.side.prefix() == len(s.side.lines) && int64(len(s.side.bytes())) == s.size {
			s.side.whole = true
		}
	}
	return t
}
