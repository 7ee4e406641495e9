//go:build !linux

package runner

import (
	"context"
	"io"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// ApplyOptions configure Apply.
type ApplyOptions struct {
	AuditRoot string
	Paths     []string
	Force     bool
	Stderr    io.Writer
	By        string
	Within    string
}

// DiscardOptions configure Discard.
type DiscardOptions struct{ By string }

// StageResult is what Apply or Discard did.
type StageResult struct {
	Paths, Refused, Conflicts, Quarantined []string
	Pending                                int
}

func errNoStage() error { return errdefs.Unsupportedf("staged runs are unimplemented on this GOOS") }

func (r *run) prepareStage(*sandbox.Host) error { return errNoStage() }

func (r *run) stagedDiff(context.Context) (*fsdiff.Result, error) {
	return nil, errNoStage()
}

func (r *run) finishStage() error { return errNoStage() }

type checkpoint struct{ Checkpoint }

func (r *run) openStagedSession() error { return errNoStage() }

func (r *run) checkpoint(string, bool) (Checkpoint, error) { return Checkpoint{}, errNoStage() }

func (r *run) rollback(context.Context, string) (RollbackResult, error) {
	return RollbackResult{}, errNoStage()
}

func (r *run) endStagedSession() error { return nil }

// Apply is unimplemented on this GOOS.
func Apply(string, ApplyOptions) (StageResult, error) { return StageResult{}, errNoStage() }

// Discard is unimplemented on this GOOS.
func Discard(string, string, DiscardOptions) (StageResult, error) { return StageResult{}, errNoStage() }
