package podseccomp

import (
	"encoding/json"
	"errors"
	"slices"
	"syscall"

	"github.com/containerd/containerd/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// netnsFlags are the namespace flags the profile lets clone take: a user namespace
// and the network namespace it owns.
const netnsFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET

// Profile is the profile, as the JSON file the kubelet hands the runtime (the OCI
// runtime spec's LinuxSeccomp), for this machine's architecture.
func Profile() ([]byte, error) {
	p, err := profile()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// profile is containerd's default for a process with no capability, whose clone rule
// (allowed only when no CLONE_NEW* flag is set) is made to let netnsFlags through.
func profile() (*specs.LinuxSeccomp, error) {
	p := seccomp.DefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	found := 0
	for i, sc := range p.Syscalls {
		if !slices.Equal(sc.Names, []string{"clone"}) || sc.Action != specs.ActAllow {
			continue
		}
		for j, a := range sc.Args {
			if a.Op == specs.OpMaskedEqual && a.ValueTwo == 0 && a.Value&netnsFlags == netnsFlags {
				p.Syscalls[i].Args[j].Value &^= netnsFlags
				found++
			}
		}
	}
	if found != 1 {
		return nil, errors.New("containerd's default seccomp profile has no single clone rule refusing namespace flags: cannot derive the Pod's profile")
	}
	return p, nil
}
