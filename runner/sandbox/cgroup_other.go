//go:build !linux

package sandbox

import "errors"

// cgroup is empty: cgroups are Linux's, and no CommandCgroup is made elsewhere.
type cgroup struct{}

var errNoCgroups = errors.New("command cgroups: unimplemented on this GOOS")

// Kill fails: there are no cgroups on this GOOS.
func (c *CommandCgroup) Kill() error { return errNoCgroups }

// Empty reports true: there are no cgroups on this GOOS.
func (c *CommandCgroup) Empty() bool { return true }

// Rmdir fails: there are no cgroups on this GOOS.
func (c *CommandCgroup) Rmdir() error { return errNoCgroups }

// Remove fails: there are no cgroups on this GOOS.
func (c *CommandCgroup) Remove() error { return errNoCgroups }
