package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/monitor"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// unmonitored is a loopback backend whose sandboxes say why the monitor cannot watch
// them, as seatbelt's do.
type unmonitored struct{ loopbackBackend }

type unmonitoredSandbox struct{ *loopbackSandbox }

var errNoEBPF = errors.New("no eBPF on this system")

func (unmonitoredSandbox) CgroupID() (uint64, error) { return 0, errNoEBPF }

func (b unmonitored) Start(ctx context.Context, plan *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	sb, err := b.loopbackBackend.Start(ctx, plan, host)
	return unmonitoredSandbox{sb.(*loopbackSandbox)}, err
}

// TestMonitorUnavailable: a sandbox that says why the monitor cannot watch it refuses a
// run whose monitor is required, with that reason, and a best-effort run says the
// monitor is off, with it, and runs.
func TestMonitorUnavailable(t *testing.T) {
	for _, c := range []struct {
		mode contract.MonitorMode
		ok   bool
	}{{contract.MonitorRequired, false}, {contract.MonitorBestEffort, true}} {
		ws := t.TempDir()
		plan := &contract.Plan{Workspace: ws, Workdir: ws, Monitor: contract.MonitorPlan{Mode: c.mode}}
		var stderr strings.Builder
		_, err := runner.Run(context.Background(), plan, []string{"true"}, runner.Options{
			Backend: unmonitored{loopbackBackend{t}}, AuditRoot: t.TempDir(), RunRoot: t.TempDir(), Stderr: &stderr,
		})
		switch {
		case !c.ok && (!errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), errNoEBPF.Error())):
			t.Errorf("%s: %v; want a refusal saying %q", c.mode, err, errNoEBPF)
		case c.ok && (err != nil || !strings.Contains(stderr.String(), "not running") || !strings.Contains(stderr.String(), errNoEBPF.Error())):
			t.Errorf("%s: %v, stderr %q; want a run and a warning saying %q", c.mode, err, stderr.String(), errNoEBPF)
		}
	}
}

// The monitor's sockets are the sandbox's: the proxy address and the gate socket it
// allows, and the control socket it alerts on.
func TestMonitorConnectsMatchTheSandbox(t *testing.T) {
	if monitor.ProxyAddr != sandbox.ProxyAddr || monitor.GateSocket != sandbox.GatePath || monitor.ControlSocket != sandbox.ControlPath {
		t.Errorf("monitor knows %s, %s and %s; the sandbox has %s, %s and %s", monitor.ProxyAddr, monitor.GateSocket, monitor.ControlSocket, sandbox.ProxyAddr, sandbox.GatePath, sandbox.ControlPath)
	}
}
