//go:build !linux

package cli

import (
	"context"
	"io"

	"github.com/cordonhq/cordon/contract"
)

func containerBackends() []backendInfo {
	return []backendInfo{
		{name: "docker", why: "Linux only (the sandbox's process 1 is a Linux binary)"},
		{name: "containerd", why: "Linux only"},
	}
}

type describer interface {
	Describe(ctx context.Context) string
}

type collector interface {
	Name() string
	GC(ctx context.Context) ([]string, error)
}

func explainContainer(w io.Writer, backend string, plan *contract.Plan) {}
