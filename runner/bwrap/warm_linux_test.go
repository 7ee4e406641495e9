package bwrap

import (
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/testutil"
)

// What Warm begins is Start's to take once; release drops it only when no Start did.
func TestWarmTakenOnce(t *testing.T) {
	testutil.RequireRoot(t)
	b := &Backend{}
	plan := &contract.Plan{Workspace: t.TempDir()} // root's: the dedicated sandbox id
	release := b.Warm(plan)
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
	release = b.Warm(other)
	release()
	if b.take(other, nil) != nil {
		t.Fatal("release left it for a later Start")
	}
}
