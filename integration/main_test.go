package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/internal/testutil/bpfroots"
)

// TestMain removes what killed test processes left (their pinned programs, their
// short directories in the temporary directory and what is mounted there), then runs
// the tests, then removes the binaries testutil.Cordon built.
func TestMain(m *testing.M) {
	bpfroots.Sweep()
	sweepShortTempDirs()
	testutil.Main(m, removeAttacker, removeBulkPool)
}

// shortTempPrefix is the name shortTempDir's directories start with: the test
// process's pid, so that a later run can tell which are a dead process's.
func shortTempPrefix(pid int) string { return "cr" + strconv.Itoa(pid) + "-" }

var shortTempName = regexp.MustCompile(`^cr([0-9]+)-[0-9]+$`)

// sweepShortTempDirs removes the short directories of test processes no longer
// running, and first unmounts what is mounted below them: a killed test's tenant disks
// stay mounted (with their loop devices) and in every mount table read afterwards.
func sweepShortTempDirs() {
	tmp := os.TempDir()
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		m := shortTempName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if !testutil.ProcessGone(m[1]) {
			continue // its process runs (or cannot be told)
		}
		d := filepath.Join(tmp, e.Name())
		unmountUnder(d)
		_ = os.RemoveAll(d)
	}
}
