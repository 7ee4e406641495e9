package runner

import (
	"encoding/json"
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

// Bounds of a turn's changed paths, kept in the supervisor (a host process outside the
// sandbox's memory limit) until the agent sweeps: a sandbox can change thousands of
// long paths a command, and an agent may never sweep. Past either bound a path is
// counted in Turn.More, not kept. maxTurnBytes (the paths as JSON strings) keeps the
// sweep's answer well within the protocol's 1 MiB line (session/client.go).
const (
	maxTurnPaths = 10000
	maxTurnBytes = 512 << 10
)

// Turn is what Sweep reports about the turn it ends.
type Turn struct {
	Removed int      // spill files deleted
	Changed []string // workspace paths the turn's commands changed, sorted
	// More counts the changes past the list's bounds (maxTurnPaths, maxTurnBytes), not
	// in Changed: when it is not 0 the list is incomplete (a path changed by several
	// commands may be counted once for each).
	More int
}

// Sweep ends an agent's turn: it deletes the session's spill files and returns them
// counted, with the workspace paths the commands changed since the previous Sweep (for
// a harness to append to its next request).
func (s *Session) Sweep() (Turn, error) {
	n, err := outcap.Sweep(s.r.spillDir)
	changed, more := s.r.takeTurn()
	return Turn{Removed: n, Changed: changed, More: more}, err
}

// noteTurn adds a command's changed paths to the current turn's, within the turn's
// bounds; past them it counts them (Turn.More).
func (r *run) noteTurn(paths ...string) {
	r.turnMu.Lock()
	defer r.turnMu.Unlock()
	if r.turn == nil {
		r.turn = map[string]bool{}
	}
	for _, p := range paths {
		if p == "" || r.turn[p] {
			continue
		}
		n := jsonLen(p)
		if len(r.turn) >= maxTurnPaths || r.turnBytes+n > maxTurnBytes {
			r.turnMore++
			continue
		}
		r.turn[p] = true
		r.turnBytes += n
	}
}

// jsonLen is the length of p as a JSON string in the sweep's answer, its quotes and
// separator counted.
func jsonLen(p string) int {
	b, _ := json.Marshal(p)
	return len(b) + 1
}

// takeTurn returns the current turn's changed paths, sorted, and the count of those
// past its bounds, and starts a new turn.
func (r *run) takeTurn() ([]string, int) {
	r.turnMu.Lock()
	defer r.turnMu.Unlock()
	out := make([]string, 0, len(r.turn))
	for p := range r.turn {
		out = append(out, p)
	}
	more := r.turnMore
	r.turn, r.turnBytes, r.turnMore = nil, 0, 0
	sort.Strings(out)
	return out, more
}
