//go:build !linux

package linux

import (
	"runtime"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// CgroupMounts is Linux's: elsewhere there is no cgroup mount, and the error says so.
func CgroupMounts() (v2 string, v1 map[string]string, err error) {
	return "", nil, errdefs.Unsupportedf("cgroups on %s", runtime.GOOS)
}
