package integration

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// containerBackends are the backends whose sandbox is a container.
var containerBackends = []string{"docker", "containerd"}

// escapeTests are the foundation and egress issues' escape tests (and the credential
// and monitor tests). They run unchanged
// against every container backend (newWorld passes CORDON_BACKEND on); the host view
// (no image in their contracts) gives the sandbox the same file system as bwrap's.
// TestNoBwrapRefuses is bwrap's own (TestContainerEngineUnreachable is its
// counterpart here).
var escapeTests = []struct {
	name string
	fn   func(*testing.T)
}{
	{"WriteOutsideWorkspaceFails", TestWriteOutsideWorkspaceFails},
	{"WriteIntoGitFails", TestWriteIntoGitFails},
	{"CreatingGitInNonRepoFails", TestCreatingGitInNonRepoFails},
	{"WriteIntoEtcFails", TestWriteIntoEtcFails},
	{"WorkspaceIsWritable", TestWorkspaceIsWritable},
	{"ReadShadowFails", TestReadShadowFails},
	{"ReadCallerSSHKeyFails", TestReadCallerSSHKeyFails},
	{"DenyReadHidesFiles", TestDenyReadHidesFiles},
	{"SymlinkInWorkspaceCannotWidenAccess", TestSymlinkInWorkspaceCannotWidenAccess},
	{"HostLoopbackUnreachable", TestHostLoopbackUnreachable},
	{"CallerSecretsNotVisible", TestCallerSecretsNotVisible},
	{"TimeoutKillsWholeTree", TestTimeoutKillsWholeTree},
	{"ExitCodesAndStdin", TestExitCodesAndStdin},
	{"DeniedCommandPattern", TestDeniedCommandPattern},
	{"SignalToCordonTearsDown", TestSignalToCordonTearsDown},
	{"KilledCordonLeavesNothingAfterGC", TestKilledCordonLeavesNothingAfterGC},
	{"LimitsEnforced", TestLimitsEnforced},
	{"EgressAllowedThroughProxy", TestEgressAllowedThroughProxy},
	{"EgressDenied", TestEgressDenied},
	{"EgressBypassHasNoRoute", TestEgressBypassHasNoRoute},
	{"EgressTLSAndSNI", TestEgressTLSAndSNI},
	{"EgressLargeTransfersAndConcurrency", TestEgressLargeTransfersAndConcurrency},
	{"EgressSOCKS5", TestEgressSOCKS5},
	// Credentials reach a container too (env, and files through pid1's pipe).
	{"CredentialsLiveExactlyAsLongAsTheRun", TestCredentialsLiveExactlyAsLongAsTheRun},
	{"CredentialsRevokedByGCAfterKill9", TestCredentialsRevokedByGCAfterKill9},
	{"CredentialProviderFailureRefusesTheRun", TestCredentialProviderFailureRefusesTheRun},
	{"CredentialDeliveredByProxy", TestCredentialDeliveredByProxy},
	// The monitor watches a container's cgroup too. (TestMonitorRequiredRefusesWithout
	// Privileges is bwrap's: an unprivileged user cannot reach an engine at all.)
	{"MonitorKillStopsTheRun", TestMonitorKillStopsTheRun},
	{"MonitorAlertsWithoutKilling", TestMonitorAlertsWithoutKilling},
	{"KilledMonitoredCordonLeavesNoPinsAfterGC", TestKilledMonitoredCordonLeavesNoPinsAfterGC},
	{"MonitorPinsUnreachable", TestMonitorPinsUnreachable},
	{"MonitorAlertsOnControlSocketConnect", TestMonitorAlertsOnControlSocketConnect},
	{"MonitorAllowsTheGateSocket", TestMonitorAllowsTheGateSocket},
	{"MonitorAlertsOnProcessOnesFiles", TestMonitorAlertsOnProcessOnesFiles},
	// Sessions: one container, its process 1 serving every exec.
	{"SessionIsOneSandbox", TestSessionIsOneSandbox},
	{"SessionCapSpillSweep", TestSessionCapSpillSweep},
	{"SessionGoClient", TestSessionGoClient},
	{"SessionSupervisorKilledLeavesNothing", TestSessionSupervisorKilledLeavesNothing},
	{"SessionCommandCgroups", TestSessionCommandCgroups},
	// Gates: the sandbox asks over the same socket; the operation runs on the host.
	{"GateApprovedPushesBranch", TestGateApprovedPushesBranch},
	{"GateRequestNamesItsCommand", TestGateRequestNamesItsCommand},
	{"ServeGatesAndAudit", TestServeGatesAndAudit},
	// Isolation: the kernel and cordon's control plane out of reach.
	{"KernelInterfacesNotWritable", TestKernelInterfacesNotWritable},
	{"ProcessOneOutOfReach", TestProcessOneOutOfReach},
	{"SeccompRefusesWhatAgentsNeverNeed", TestSeccompRefusesWhatAgentsNeverNeed},
	{"NoCgroupReachable", TestNoCgroupReachable},
	{"StdioIsNotAHostFile", TestStdioIsNotAHostFile},
	{"SessionProcessOneCannotBeTakenOver", TestSessionProcessOneCannotBeTakenOver},
	{"NoSetIDFilesPlanted", TestNoSetIDFilesPlanted},
	{"HostWatchCannotBeHeld", TestHostWatchCannotBeHeld},
	{"ContractNotWritable", TestContractNotWritable},
	{"DenialsHoldAgainstRenames", TestDenialsHoldAgainstRenames},
	{"DenialThroughALinkRefused", TestDenialThroughALinkRefused},
	{"HostExecutedFilesProtected", TestHostExecutedFilesProtected},
	{"SessionLogHasNoGaps", TestSessionLogHasNoGaps},
	{"NestedRepositoryQuarantined", TestNestedRepositoryQuarantined},
	{"GitCommitMode", TestGitCommitMode},
	{"GitReadOnlyByDefault", TestGitReadOnlyByDefault},
	{"ChangedNestedRepositoryQuarantined", TestChangedNestedRepositoryQuarantined},
	{"BareRepositoryByLinksQuarantined", TestBareRepositoryByLinksQuarantined},
	{"NewRepositoryDisarmedAtOnce", TestNewRepositoryDisarmedAtOnce},
	{"ContractBelowTheRootQuarantined", TestContractBelowTheRootQuarantined},
}

var (
	enginesOnce sync.Once
	testImage   string // the busybox test image, in Docker and in containerd's "cordon" namespace
	enginesErr  string
)

// requireEngines starts containerd and dockerd when they do not answer and builds the
// test image (scripts/container-env.sh, which `make test` also runs), once.
func requireEngines(t *testing.T) string {
	t.Helper()
	testutil.Require(t, runtime.GOOS == "linux", "container backends need Linux")
	testutil.RequireRoot(t)
	enginesOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command(filepath.Join(filepath.Dir(file), "..", "scripts", "container-env.sh"))
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			enginesErr = "scripts/container-env.sh: " + err.Error() + ": " + errb.String()
			return
		}
		testImage = strings.TrimSpace(string(out))
	})
	testutil.Require(t, enginesErr == "", enginesErr)
	return testImage
}

// forEachContainerBackend runs fn as a subtest per container backend, with
// CORDON_BACKEND set, and checks afterwards that nothing was left behind.
func forEachContainerBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	requireEngines(t)
	for _, b := range containerBackends {
		t.Run(b, func(t *testing.T) {
			t.Setenv("CORDON_BACKEND", b)
			fn(t, b)
			assertNoLeftovers(t, b)
		})
	}
}

func TestContainerEscapes(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		for _, et := range escapeTests {
			t.Run(et.name, et.fn)
		}
	})
}
