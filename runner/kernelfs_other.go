//go:build !linux

package runner

import "github.com/cordonhq/cordon/contract"

// checkKernelFilesystems is Linux's: elsewhere there is no /proc or /sys to grant.
func checkKernelFilesystems(*contract.Plan) error { return nil }
