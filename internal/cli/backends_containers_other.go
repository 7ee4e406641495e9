//go:build !linux

package cli

import (
	"io"

	"github.com/cordonhq/cordon/contract"
)

func containerBackends() []backendInfo {
	return []backendInfo{
		{name: "docker", why: "Linux only (the sandbox's process 1 is a Linux binary)"},
		{name: "containerd", why: "Linux only"},
	}
}

func explainContainer(w io.Writer, backend string, plan *contract.Plan) {}
