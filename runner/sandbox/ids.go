package sandbox

import (
	"os"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// DedicatedIDEnv overrides the dedicated host uid:gid a root cordon runs sandboxes as
// when root owns the workspace.
const DedicatedIDEnv = "CORDON_SANDBOX_ID"

// DefaultDedicatedID is that uid and gid: no user of a Debian system has it.
const DefaultDedicatedID = 64999

// DedicatedID is the host uid and gid a sandbox runs as instead of root's, so that it
// is never host root: [DefaultDedicatedID], or $CORDON_SANDBOX_ID (UID[:GID], never 0).
func DedicatedID() (uid, gid int, err error) {
	v := os.Getenv(DedicatedIDEnv)
	if v == "" {
		return DefaultDedicatedID, DefaultDedicatedID, nil
	}
	u, g, ok := strings.Cut(v, ":")
	if !ok {
		g = u
	}
	uid, e1 := strconv.Atoi(u)
	gid, e2 := strconv.Atoi(g)
	if e1 != nil || e2 != nil || uid <= 0 || gid <= 0 {
		return 0, 0, errdefs.Invalidf("%s=%q: want UID[:GID], not 0", DedicatedIDEnv, v)
	}
	return uid, gid, nil
}
