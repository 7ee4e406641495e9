package cli

import (
	"github.com/cordonhq/cordon/runner/bwrap"
	"github.com/cordonhq/cordon/runner/sandbox"
)

func newBwrap() sandbox.Backend { return &bwrap.Backend{} }
