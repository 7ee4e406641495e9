package runner

import (
	"fmt"
	"io"
	"path"
	"path/filepath"
	"sort"

	"github.com/cordonhq/cordon/runner/outcap"
)

// Capped describes one capped output stream of a session command.
type Capped struct {
	Truncated bool
	SpillPath string // inside the sandbox; "" unless Truncated
	Chars     int64  // characters the command wrote
	Cut       int64  // characters not shown
}

// capStreams wraps a session command's stdout and stderr in output caps (ExecOptions.Cap)
// whose spill files land in the session's spill directory, named by the command's id.
// The returned finish closes them, writes each cut stream's notice line after its
// kept part, and records the outcome in res.
func (r *run) capStreams(cmdID string, capN int, stdout, stderr io.Writer) (io.Writer, io.Writer, func(res *ExecResult)) {
	if capN <= 0 || r.spillDir == "" {
		return stdout, stderr, func(*ExecResult) {}
	}
	shown := r.sb.SpillShown()
	open := func(w io.Writer, ext string) *outcap.Stream {
		return outcap.New(outcap.Options{
			Cap: capN, Forward: w,
			HostPath:  filepath.Join(r.spillDir, cmdID+ext),
			ShownPath: path.Join(shown, cmdID+ext),
		})
	}
	out, errOut := open(stdout, ".stdout"), open(stderr, ".stderr")
	finish := func(res *ExecResult) {
		for i, s := range []*outcap.Stream{out, errOut} {
			c, err := s.Close()
			if err != nil {
				r.o.Log.Warn("output cap", "cmd", cmdID, "err", err)
				fmt.Fprintf(stderr, "cordon: warning: keeping the whole output: %v\n", err)
			}
			if c.Notice != "" {
				_, _ = io.WriteString([]io.Writer{stdout, stderr}[i], c.Notice)
			}
			res.Output[i] = Capped{Truncated: c.Truncated, SpillPath: c.SpillPath, Chars: c.Chars, Cut: c.Cut}
		}
		// The session's spill files together stay bounded: the oldest go first.
		if n, err := outcap.Trim(r.spillDir, 0); err != nil || n > 0 {
			r.o.Log.Debug("spill files trimmed", "removed", n, "err", err)
		}
	}
	return out, errOut, finish
}

// Turn is what Sweep reports about the turn it ends.
type Turn struct {
	Removed int      // spill files deleted
	Changed []string // workspace paths the turn's commands changed, sorted
}

// Sweep ends an agent's turn: it deletes the session's spill files and returns them
// counted, with the workspace paths the commands changed since the previous Sweep (for
// a harness to append to its next request).
func (s *Session) Sweep() (Turn, error) {
	n, err := outcap.Sweep(s.r.spillDir)
	return Turn{Removed: n, Changed: s.r.takeTurn()}, err
}

// noteTurn adds a command's changed paths to the current turn's.
func (r *run) noteTurn(paths ...string) {
	r.turnMu.Lock()
	defer r.turnMu.Unlock()
	if r.turn == nil {
		r.turn = map[string]bool{}
	}
	for _, p := range paths {
		if p != "" {
			r.turn[p] = true
		}
	}
}

// takeTurn returns the current turn's changed paths, sorted, and starts a new turn.
func (r *run) takeTurn() []string {
	r.turnMu.Lock()
	defer r.turnMu.Unlock()
	out := make([]string, 0, len(r.turn))
	for p := range r.turn {
		out = append(out, p)
	}
	r.turn = nil
	sort.Strings(out)
	return out
}
