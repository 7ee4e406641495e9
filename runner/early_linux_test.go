package runner

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner/bwrap"
)

// A one-command run on bwrap builds its sandbox while the monitor attaches and the
// baseline and cmd.start are written (setUpEarly). A failure in either branch must
// end the run with nothing of it left: the command never ran, the run directory is
// gone, no process of the sandbox remains, and the log is sealed with the reason.

// earlyRun runs `sh -c "touch ran"` in a fresh workspace with o's knobs and returns
// what Run returned with the workspace, the run root and the audit root.
func earlyRun(t *testing.T, o Options) (Result, string, string, string, error) {
	t.Helper()
	testutil.RequireBwrap(t)
	ws, runRoot, auditRoot := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := contract.HostFromOS()
	if err != nil {
		t.Fatal(err)
	}
	h.Cwd = ws
	plan, err := contract.Compile(contract.Default(), h)
	if err != nil {
		t.Fatal(err)
	}
	if o.Backend == nil {
		o.Backend = &bwrap.Backend{}
	}
	o.Init = filepath.Join(filepath.Dir(testutil.Cordon(t)), "cordon-init")
	o.RunRoot, o.AuditRoot = runRoot, auditRoot
	res, err := Run(context.Background(), plan, []string{"sh", "-c", "touch ran"}, o)
	return res, ws, runRoot, auditRoot, err
}

// assertNothingLeft checks that the run left nothing behind and never ran its command.
func assertNothingLeft(t *testing.T, res Result, ws, runRoot string) []audit.Record {
	t.Helper()
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("the command ran")
	}
	// The placeholder lock is the run root's, as its sessions directory is.
	if ents, _ := os.ReadDir(runRoot); len(ents) > 0 && (len(ents) > 1 || ents[0].Name() != filepath.Base(paths.Root(runRoot).PlaceholderLock())) {
		t.Errorf("the run root still holds %v", ents)
	}
	if procs := processesNaming(ws); len(procs) > 0 {
		t.Errorf("processes of the run are left: %v", procs)
	}
	recs, err := audit.ReadEvents(filepath.Join(res.AuditDir, audit.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	var end audit.RunEnd
	if err := json.Unmarshal(last.Body, &end); err != nil || last.Type != "run.end" || end.Reason != audit.ReasonError {
		t.Errorf("the log ends with %s %s, want run.end with reason %q", last.Type, last.Body, audit.ReasonError)
	}
	return recs
}

// processesNaming lists the command lines of processes that name s in theirs.
func processesNaming(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func TestEarlySetupFailureKillsTheSandbox(t *testing.T) {
	injected := errors.New("injected setup failure")
	res, ws, runRoot, _, err := earlyRun(t, Options{beforeCommand: func() error { return injected }})
	if !errors.Is(err, injected) {
		t.Fatalf("Run: %v, want the setup's failure", err)
	}
	recs := assertNothingLeft(t, res, ws, runRoot)
	for _, r := range recs {
		if r.Type == "cmd.start" {
			t.Error("cmd.start was written for a command that could not start")
		}
	}
	if !strings.Contains(string(recs[len(recs)-1].Body), injected.Error()) {
		t.Errorf("run.end does not say why: %s", recs[len(recs)-1].Body)
	}
}

func TestEarlySandboxFailureWaitsForTheSetup(t *testing.T) {
	// A bwrap that fails at once: the sandbox's branch ends while the setup's may still
	// be running, and Run must wait for it before tearing down.
	setupRan := false
	res, ws, runRoot, _, err := earlyRun(t, Options{
		Backend:       &bwrap.Backend{Path: "false"},
		beforeCommand: func() error { setupRan = true; return nil },
	})
	if err == nil || !strings.Contains(err.Error(), "bwrap could not build the sandbox") {
		t.Fatalf("Run: %v, want bwrap's failure", err)
	}
	if !setupRan {
		t.Error("the setup branch did not run")
	}
	assertNothingLeft(t, res, ws, runRoot)
}
