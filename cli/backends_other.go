//go:build !linux

package cli

import "github.com/cordonhq/cordon/runner/sandbox"

func newBwrap() sandbox.Backend { return nil }
