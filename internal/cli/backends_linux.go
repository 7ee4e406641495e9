package cli

import (
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/bwrap"
)

func newBwrap() runner.Backend { return &bwrap.Backend{} }
