//go:build !linux

package bwrap

// warmed is Linux's (warm_linux.go): nothing is begun elsewhere.
type warmed struct{}
