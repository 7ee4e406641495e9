//go:build linux && !noengines

package cli

import (
	"github.com/cordonhq/cordon/runner/containerd"
	"github.com/cordonhq/cordon/runner/docker"
	"github.com/cordonhq/cordon/runner/kubernetes"
)

// containerBackends are the container backends, in --backend auto's order of
// preference after bwrap.
func containerBackends() []backendInfo {
	return []backendInfo{
		{name: "docker", backend: &docker.Backend{}, needsImage: true},
		{name: "containerd", backend: &containerd.Backend{}, needsImage: true},
		{name: "kubernetes", backend: &kubernetes.Backend{}, named: true},
	}
}
