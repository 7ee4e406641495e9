package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// TestStagedRunRefusedByABackendThatCannotStage: a backend whose CanStage answers
// sandbox.ErrNoStage (seatbelt's, this test's loopback one) refuses a staged run before
// its sandbox starts, unavailable, with the hint to run without --stage.
func TestStagedRunRefusedByABackendThatCannotStage(t *testing.T) {
	ws := t.TempDir()
	plan := &contract.Plan{Workspace: ws, Workdir: ws}
	_, err := runner.Run(context.Background(), plan, []string{"true"}, runner.Options{
		Backend: loopbackBackend{t}, AuditRoot: t.TempDir(), RunRoot: t.TempDir(), Stage: true,
	})
	const want = "loopback-test: staged runs are not implemented on this backend; run without --stage, or on bwrap"
	if !errors.Is(err, sandbox.ErrNoStage) || !errors.Is(err, errdefs.ErrUnavailable) || errdefs.Message(err) != want {
		t.Fatalf("err %v (message %q); want ErrNoStage, unavailable, saying %q", err, errdefs.Message(err), want)
	}
}
