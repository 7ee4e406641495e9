package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
)

// TestExplainBackend: `cordon explain` prints what the chosen backend says of itself
// (bwrap for auto), and nothing for a backend this build lacks; seatbelt prints its
// profile on any host.
func TestExplainBackend(t *testing.T) {
	plan := &contract.Plan{Workspace: "/nonexistent/ws", ContractDigest: "sha256:0123", Image: "alpine:3.19", Pull: "never"}
	engines := containerBackends()[0].backend != nil
	for _, tc := range []struct {
		backend string
		want    []string // empty: nothing printed
	}{
		{"auto", []string{"\nbwrap backend: the host paths above appear at the same paths inside; cordon's binary is process 1 (/run/cordon/cordon, read-only).\n"}},
		{"bwrap", []string{"\nbwrap backend: "}},
		{"docker", []string{"\ndocker backend: one container per run or session", "cordon.contract=sha256:0123", "Root file system: the image alpine:3.19 (read-only; pull: never)",
			"Runs as the workspace owner's uid:gid,", "no network (--network none) but the egress proxy on 127.0.0.1:3128", "(/run/cordon/cordon, read-only).\n"}},
		{"containerd", []string{"\ncontainerd backend: ", "no network (an empty network namespace)"}},
		{"seatbelt", []string{"\nseatbelt backend: sandbox-exec -p PROFILE", "\n(version 1)\n(deny default)\n", "; Network: none."}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			var out bytes.Buffer
			explainBackend(&out, tc.backend, plan)
			if !engines && (tc.backend == "docker" || tc.backend == "containerd") {
				tc.want = nil // the noengines build delegates explain to cordon-engines
			}
			if len(tc.want) == 0 && out.Len() != 0 {
				t.Errorf("got %q; want nothing", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("got %q; want it to contain %q", out.String(), w)
				}
			}
			if strings.Count(out.String(), "backend: ") > 1 {
				t.Errorf("got %q; want one backend", out.String())
			}
		})
	}
}
