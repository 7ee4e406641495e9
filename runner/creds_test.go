package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// neverStarts is a backend that is available but must not be asked for a sandbox.
type neverStarts struct{ t *testing.T }

func (neverStarts) Name() string                              { return "never-starts" }
func (neverStarts) Check(context.Context) error               { return nil }
func (neverStarts) HostUID(*contract.Plan) (int, bool, error) { return 0, false, nil }
func (neverStarts) Warm(*contract.Plan, int) func()           { return nil }
func (neverStarts) CanStage() error                           { return sandbox.ErrNoStage }
func (neverStarts) LoopbackEgress() bool                      { return false }
func (b neverStarts) Start(context.Context, *contract.Plan, sandbox.Host) (sandbox.Sandbox, error) {
	b.t.Error("the sandbox was started although a credential could not be issued")
	return nil, errors.New("never-starts: no sandbox")
}

// TestCredentialFailureKeepsItsCause: a credential that cannot be issued refuses the
// run with an error that is both in the category ErrUnavailable (exit 125) and, through
// the runner's wrapping, the broker's *creds.IssueError naming the credential.
func TestCredentialFailureKeepsItsCause(t *testing.T) {
	ws := t.TempDir()
	plan := &contract.Plan{Workspace: ws, Workdir: ws, Credentials: []contract.Credential{
		{Name: "API_TOKEN", Provider: "local", Why: "a scope-less local token cannot be issued"},
	}}
	_, err := runner.Run(context.Background(), plan, []string{"true"}, runner.Options{
		Backend: neverStarts{t}, AuditRoot: t.TempDir(), RunRoot: t.TempDir(),
	})
	var ie *creds.IssueError
	if !errors.As(err, &ie) || ie.Name != "API_TOKEN" {
		t.Fatalf("err %v; want it to wrap a *creds.IssueError naming API_TOKEN", err)
	}
	if !errors.Is(err, errdefs.ErrUnavailable) || errdefs.ExitCode(err) != errdefs.ExitCannotRun {
		t.Errorf("err %v: exit %d; want ErrUnavailable, exit 125", err, errdefs.ExitCode(err))
	}
	if msg := errdefs.Message(err); msg != "credentials: "+ie.Error() {
		t.Errorf("message %q; want %q", msg, "credentials: "+ie.Error())
	}
}
