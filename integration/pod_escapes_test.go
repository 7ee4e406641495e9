//go:build k8s

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/integration/k8stest"
)

// podEscapeTests are the escape tests (escapeTests) that run on a Pod, unchanged,
// through `cordon run --backend kubernetes` (the Pod test image has busybox, curl,
// bash, openssl and git). Those that asserted GNU or bash wording now assert what
// happened, on every backend: WriteOutsideWorkspace (the directory does not exist
// inside), DenyReadHides (no read yields the content: a hidden file is unreadable
// elsewhere, an empty directory in a Pod), StdioIsNotAHostFile (ls lists the shell's
// descriptors from a process of its own: busybox's sh runs ls in its own process),
// SessionIsOneSandbox (the background process by its pid: no pgrep in busybox). The
// git tests run git trusting the workspace (its files belong to an unmapped uid in a
// Pod, and git would refuse "dubious ownership" first). NestedRepositoryQuarantined
// keeps only the rename certain on a Pod (the sync lands the repository entry by
// entry, the live watch renames it as the directory appears). Those left out, and why:
//   - SymlinkInWorkspaceCannotWidenAccess: a link leaving the workspace is not put in
//     the Pod at all (its target is this host's), so there is nothing to write
//     through; the attack as it applies to a Pod (links made in the Pod, followed by
//     a later command or the sync) is testSymlinkInPodCannotWidenAccess;
//   - NewRepositoryDisarmedAtOnce: the live watch sees this host's workspace, not the
//     Pod's volume: a command sees the repository it made until it ends; the host's
//     copy is disarmed as the sync lands it (NestedRepositoryQuarantined);
//   - the host view (the caller's ~/.ssh, /etc/shadow of the host): a Pod runs an
//     image, never the host's file system;
//   - the syscall monitor: refused on the kubernetes backend (it watches this host's
//     kernel); GateRequestNamesItsCommand: a Pod's gate request names the session's
//     current command, not the one that asked (its peer is the relay);
//   - the host's cgroups, uids and run directories (limits, command cgroups, gc
//     after kill -9): the node's, covered by TestBackendKubernetes's killed
//     supervisor and the placement's own tests.
var podEscapeTests = []string{
	"ExitCodesAndStdin", "TimeoutKillsWholeTree", "DeniedCommandPattern", "CallerSecretsNotVisible",
	"EgressAllowedThroughProxy", "EgressDenied", "EgressBypassHasNoRoute", "EgressTLSAndSNI",
	"EgressLargeTransfersAndConcurrency", "EgressSOCKS5", "HostLoopbackUnreachable",
	"CredentialProviderFailureRefusesTheRun",
	// With the workspace filled and brought back.
	"WriteIntoGitFails", "WorkspaceIsWritable", "CredentialsLiveExactlyAsLongAsTheRun", "CredentialDeliveredByProxy",
	"KernelInterfacesNotWritable", "ProcessOneOutOfReach", "SeccompRefusesWhatAgentsNeverNeed", "NoCgroupReachable",
	"SessionGoClient", "SessionProcessOneCannotBeTakenOver", "ContractNotWritable", "DenialsHoldAgainstRenames",
	"HostExecutedFilesProtected", "NoSetIDFilesPlanted", "CreatingGitInNonRepoFails",
	// The Pod's workspace brought back before each command and at the session's end.
	"SessionLogHasNoGaps",
	// Gates: `cordon gate` in the Pod asks the run's gate service on this host.
	"GateApprovedPushesBranch", "ServeGatesAndAudit",
	// Asserting behaviour rather than a shell's wording.
	"WriteOutsideWorkspaceFails", "DenyReadHidesFiles", "StdioIsNotAHostFile", "SessionIsOneSandbox",
	// git in the image; nested repositories quarantined as the sync lands them.
	"GitCommitMode", "GitReadOnlyByDefault", "NestedRepositoryQuarantined", "ChangedNestedRepositoryQuarantined",
	"BareRepositoryByLinksQuarantined", "ContractBelowTheRootQuarantined",
}

// TestEscapesOnPods runs podEscapeTests with every run placed on the test cluster (a
// fresh namespace enforcing the restricted Pod Security profile).
func TestEscapesOnPods(t *testing.T) {
	cs, _ := k8stest.ClientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ns, node := k8stest.NamespaceWith(ctx, t, cs, k8stest.Restricted)
	for _, kv := range k8stest.BackendEnv(t, ns, node, k8stest.PodImage(t), "escapes") {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	t.Setenv("CORDON_BACKEND", "kubernetes")
	for _, name := range podEscapeTests {
		found := false
		for _, et := range escapeTests {
			if et.name == name {
				found = true
				t.Run(et.name, et.fn)
			}
		}
		if !found {
			t.Errorf("no escape test %s", name)
		}
	}
	// SymlinkInWorkspaceCannotWidenAccess's attack as it applies to a Pod.
	t.Run("SymlinkInPodCannotWidenAccess", testSymlinkInPodCannotWidenAccess)
}
