// Package runner owns the life of a run: it prepares the host side (run directory,
// placeholders for denied paths), asks a [Backend] for a [Sandbox] built from a
// [contract.Plan], executes commands in it with a timeout, and tears everything down on
// every exit path. Backends live in subpackages and only translate a Plan into their
// mechanism.
//
// The API is unstable until v1.
package runner
