package runner

import (
	"context"
	"os"
	"regexp"
	"sync"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// A staged session (StartSession with Options.Stage) writes to an overlay of the
// workspace for as long as it lives, as a staged run does, and keeps checkpoints of
// it: one before each command (the last AutoCheckpoints of them) and those asked for
// (Session.Checkpoint, until the session stops). Rollback makes the workspace the
// sandbox sees what it was at one of them; processes keep running. When the session
// stops, its changes wait for Apply or Discard like a staged run's.

// AutoCheckpoints is how many automatic checkpoints (one before each command) a
// staged session keeps: `rollback ID -K` reaches back K commands, K at most this.
const AutoCheckpoints = 20

// MorePathsPrefix starts the problem line of a rollback's answer that counts the
// paths it changed past those it lists (the first 1000, or 256 KiB of them): not a
// path that was not restored.
const MorePathsPrefix = "…: "

// MaxNamedCheckpoints is how many checkpoints asked for (cordon session checkpoint,
// the MCP checkpoint tool) a staged session keeps at most: one more is refused.
const MaxNamedCheckpoints = 100

// Checkpoint is a staged session's checkpoint.
type Checkpoint struct {
	N      int    // its number in the session, from 1
	Name   string // "" for an automatic one
	Auto   bool   // taken before a command
	Copied int    // staged files copied
	Linked int    // staged files unchanged since the previous checkpoint (shared)
	// Problems are staged entries it does not hold ("path: why").
	Problems []string
}

// RollbackResult is what Session.Rollback did.
type RollbackResult struct {
	To       Checkpoint
	Changed  []string // workspace paths changed
	Problems []string // what the checkpoint holds that was not restored ("path: why")
}

// stagedSession is a staged session's live overlay and checkpoints. mu serialises
// checkpoints and rollbacks and guards the fields below.
type stagedSession struct {
	mu    sync.Mutex
	live  *os.File      // the mounted overlay the sandbox sees as its workspace
	n     int           // checkpoints taken
	auto  []*checkpoint // the automatic ones kept, oldest first
	named []*checkpoint // those asked for, in order
	last  *checkpoint   // the latest taken, whose copies the next one links to
	ended bool          // the session's stage is finished: nothing more is written
}

// checkpointName is what a checkpoint may be called: not a number, nor "-K".
var checkpointName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._-]{0,63}$`) })

func validCheckpointName(name string) error {
	if name != "" && !checkpointName().MatchString(name) {
		return errdefs.Invalidf("checkpoint name %q: letters, digits, '.', '_' and '-', starting with a letter or '_', at most 64", name)
	}
	return nil
}

// Checkpoint keeps the staged session's workspace as it is now, under name (""
// for a numbered one), until the session stops, and logs it (session.checkpoint).
// Only a staged session keeps checkpoints.
func (s *Session) Checkpoint(name string) (Checkpoint, error) {
	if err := s.live(); err != nil {
		return Checkpoint{}, err
	}
	return s.r.checkpoint(name, false)
}

// Rollback makes the staged session's workspace what it was at checkpoint to: "-K"
// the K-th latest automatic checkpoint ("-1": before the last command), a number, or
// a name. Processes keep running; the log records it (session.rollback, then the
// rollback's fs.diff). What the checkpoint holds that cannot be restored is
// reported (RollbackResult.Problems), never silently dropped.
func (s *Session) Rollback(ctx context.Context, to string) (RollbackResult, error) {
	if err := s.live(); err != nil {
		return RollbackResult{}, err
	}
	return s.r.rollback(ctx, to)
}

// live says why the session takes no more requests, or nil.
func (s *Session) live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errdefs.Unavailablef("%w", ErrClosed)
	}
	return nil
}
