//go:build !unix

package command

import "os/exec"

// killGroup is a no-op: on timeout only the command itself is killed.
func killGroup(*exec.Cmd) {}
