package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// TestDiffInterspersed: cordon diff's flags go before, between or after OLD and NEW;
// everything after "--" is positional (the cases of the hand-written parser it replaced).
func TestDiffInterspersed(t *testing.T) {
	tests := []struct {
		args []string
		want []string
		json bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, false},
		{[]string{"a", "b", "--json"}, []string{"a", "b"}, true},
		{[]string{"--json", "a", "b"}, []string{"a", "b"}, true},
		{[]string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{[]string{"--", "--json", "b"}, []string{"--json", "b"}, false},
		{[]string{"a", "--", "--json"}, []string{"a", "--json"}, false},
	}
	for _, tt := range tests {
		c := newDiffCmd(IO{Stdout: io.Discard, Stderr: io.Discard})
		var got []string
		c.RunE = func(_ *cobra.Command, args []string) error { got = args; return nil }
		c.SetArgs(tt.args)
		err := c.Execute()
		j, _ := c.Flags().GetBool("json")
		if err != nil || !slices.Equal(got, tt.want) || j != tt.json {
			t.Errorf("%q: got %q, json %v, %v; want %q, json %v", tt.args, got, j, err, tt.want, tt.json)
		}
	}
}

// A contract saved outside the workspace (a base branch's, in /tmp) is compiled for the
// workspace, as it would run there: the diff of it with the workspace's own is empty.
func TestDiffComparesForOneWorkspace(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, elsewhere := filepath.Join(root, "ws"), filepath.Join(root, "elsewhere")
	for _, d := range []string{filepath.Join(ws, "secrets"), elsewhere, filepath.Join(root, "state")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const c = "version: 1\nfilesystem:\n  deny_read: [secrets]\n"
	for _, f := range []string{filepath.Join(ws, "cordon.yaml"), filepath.Join(elsewhere, "base.yaml")} {
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	err = Run(context.Background(), IO{Stdout: &out, Stderr: &errb}, []string{"diff", "--workspace", ws,
		"--audit-dir", filepath.Join(root, "state"), filepath.Join(elsewhere, "base.yaml"), filepath.Join(ws, "cordon.yaml")})
	if err != nil {
		t.Fatalf("diff: %v\n%s%s", err, out.String(), errb.String())
	}
	if !strings.HasSuffix(out.String(), "allows the same as "+filepath.Join(elsewhere, "base.yaml")+"\n") {
		t.Errorf("diff output: %q", out.String())
	}
	err = Run(context.Background(), IO{Stdout: &out, Stderr: &errb}, []string{"diff", "--workspace", filepath.Join(root, "nope"), "a", "b"})
	var st *errdefs.Status
	if !errors.As(err, &st) || errdefs.ExitCode(err) != 2 || !strings.Contains(errdefs.Message(err), "--workspace") {
		t.Errorf("a missing --workspace: %v", err)
	}
}
