package bwrap

import (
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/testutil"
)

// leasedForTest stands for a uid the runner leased (package uids): no user has it.
const leasedForTest = 0x7C00FFFE

// What Warm begins is Start's to take once; release drops it only when no Start did.
func TestWarmTakenOnce(t *testing.T) {
	testutil.RequireRoot(t)
	b := &Backend{}
	plan := &contract.Plan{Workspace: t.TempDir()} // root's: the run's leased uid
	if release := b.Warm(plan, 0); b.take(plan, nil) != nil {
		release()
		t.Fatal("Warm began a namespace for a root-owned workspace with no leased uid")
	}
	release := b.Warm(plan, leasedForTest)
	u := b.take(plan, nil)
	if u == nil {
		t.Fatal("Warm began nothing for a root-owned workspace")
	}
	defer u.Close()
	if b.take(plan, nil) != nil {
		t.Fatal("taken twice")
	}
	release() // after the take: must leave u alone
	if b.take(plan, nil) != nil {
		t.Fatal("release put something back")
	}

	other := &contract.Plan{Workspace: t.TempDir()}
	release = b.Warm(other, leasedForTest)
	release()
	if b.take(other, nil) != nil {
		t.Fatal("release left it for a later Start")
	}
}
