//go:build !linux

package ctl

// Network is the control socket's type. macOS (XNU) has no SOCK_SEQPACKET for unix
// sockets, so messages are framed on a stream (stream.go).
const Network = "unix"
