//go:build !linux

package cli

import "github.com/cordonhq/cordon/runner"

func newBwrap() runner.Backend { return nil }
