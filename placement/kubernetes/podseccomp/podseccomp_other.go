//go:build !linux

package podseccomp

import "errors"

// Profile is unimplemented off Linux: run it on a node of the cluster's architecture.
func Profile() ([]byte, error) {
	return nil, errors.New("the Pod's seccomp profile is made on Linux only (a node of the cluster's architecture)")
}
