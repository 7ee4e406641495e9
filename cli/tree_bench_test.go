package cli

import (
	"context"
	"io"
	"testing"
)

// BenchmarkRunVersion is what the command line costs a command that does nothing
// else: building the tree, parsing, dispatching (make bench).
func BenchmarkRunVersion(b *testing.B) {
	stdio := IO{Stdout: io.Discard, Stderr: io.Discard}
	for b.Loop() {
		if err := Run(context.Background(), stdio, []string{"version"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommandTree builds the whole tree (help, completion) and the one a warm
// cordon exec builds.
func BenchmarkCommandTree(b *testing.B) {
	stdio := IO{Stdout: io.Discard, Stderr: io.Discard}
	for _, first := range []string{"", "exec"} {
		b.Run("first="+first, func(b *testing.B) {
			for b.Loop() {
				newRoot(stdio, first)
			}
		})
	}
}
