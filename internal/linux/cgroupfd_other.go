//go:build !linux

package linux

import (
	"os"
	"runtime"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// OpenCgroupProcs is Linux's: cgroups exist nowhere else.
func OpenCgroupProcs(int) (*os.File, error) {
	return nil, errdefs.Unsupportedf("cgroups on %s", runtime.GOOS)
}
