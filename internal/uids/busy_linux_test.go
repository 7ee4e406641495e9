package uids

import (
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestIDsInUseEveryID: a process whose real uid alone, or effective gid alone, is in
// the range makes that id used.
func TestIDsInUseEveryID(t *testing.T) {
	testutil.SleeperWithIDs(t, 70001, 70002, 70003, 70004)
	for _, id := range []int{70001, 70002, 70003, 70004} {
		used, err := idsInUse(Range{Base: id, Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !used[id] {
			t.Errorf("id %d, one of a process's, is not in use", id)
		}
	}
	used, err := idsInUse(Range{Base: 70005, Count: 100})
	if err != nil || len(used) != 0 {
		t.Errorf("ids 70005-70104: %v, %v; want none in use", used, err)
	}
}
