package runner

import (
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestMain removes the binaries testutil.Cordon built once the tests are done.
func TestMain(m *testing.M) { testutil.Main(m) }
