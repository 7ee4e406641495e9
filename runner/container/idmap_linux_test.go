package container

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// The container runs as the workspace owner's ids, or as the dedicated ones when root
// owns the workspace or another writable source: never as root.
func TestHostIDs(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	ws, cache := filepath.Join(root, "ws"), filepath.Join(root, "cache")
	for _, d := range []string{ws, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plan := func(extra ...contract.Mount) *contract.Plan {
		ms := append([]contract.Mount{{Path: ws, Type: contract.Bind, Access: contract.ReadWrite, Dir: true}}, extra...)
		return &contract.Plan{Workspace: ws, Mounts: ms}
	}
	cacheRW := contract.Mount{Path: cache, Type: contract.Bind, Access: contract.ReadWrite, Dir: true}
	cacheRO := contract.Mount{Path: cache, Type: contract.Bind, Access: contract.ReadOnly, Dir: true}
	const leased = 2080374784 + 7 // what the runner leased the run (sandbox.Host.UID)
	check := func(name string, p *contract.Plan, uid, gid int, dedicated bool) {
		t.Helper()
		in := Input{Plan: p, Host: sandbox.Host{UID: leased}}
		if err := HostIDs(&in); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if in.UID != uid || in.GID != gid || in.Dedicated != dedicated {
			t.Errorf("%s: %d:%d dedicated %v; want %d:%d dedicated %v", name, in.UID, in.GID, in.Dedicated, uid, gid, dedicated)
		}
		if _, lease, err := HostUID(p); err != nil || lease != dedicated {
			t.Errorf("%s: HostUID asks for a lease %v (%v); want %v", name, lease, err, dedicated)
		}
	}
	check("root's workspace", plan(), leased, leased, true)
	// Without a lease the run is refused, never run as root or as a shared uid.
	if err := HostIDs(&Input{Plan: plan()}); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("root's workspace without a lease: %v; want it refused", err)
	}
	if err := os.Chown(ws, 1000, 1001); err != nil {
		t.Fatal(err)
	}
	check("a user's workspace", plan(), 1000, 1001, false)
	check("a root-owned read-only path", plan(cacheRO), 1000, 1001, false)
	check("a root-owned writable path", plan(cacheRW), leased, leased, true)
}
