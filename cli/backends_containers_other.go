//go:build !linux

package cli

func containerBackends() []backendInfo {
	return []backendInfo{
		{name: "docker", why: "Linux only (the sandbox's process 1 is a Linux binary)"},
		{name: "containerd", why: "Linux only"},
		{name: "kubernetes", why: "Linux only"},
	}
}
