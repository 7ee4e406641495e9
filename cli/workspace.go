package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/server/workspace"
	"github.com/cordonhq/cordon/session/remote"
)

// `cordon --host URL workspace …`: the tenant's workspaces on a server (docs/serve.md,
// "Workspaces"). Here a workspace is the current directory; these commands exist only
// for a server's.

// errUploadEnded stops a packing whose upload the server answered (or the
// connection ended) before it was whole.
var errUploadEnded = errors.New("the upload ended")

// Bounds of a pulled workspace: the server's tar is hostile input unpacked here.
const (
	pullMaxBytes   = 8 << 30
	pullMaxEntries = 1_000_000
)

func newWorkspaceCmd(stdio IO) *cobra.Command {
	c := &cobra.Command{
		Use:   "workspace",
		Short: "a server's workspaces: ls, push, pull, rm (with --host)",
		Long: `The tenant's workspaces on the server --host names: list them, fill a new (or empty) one
from a directory here, copy one into a new directory here, delete one. A session started
with --workspace NAME works in it.`,
		Example: `  cordon --host https://cordon.example:8443 workspace push api ./api
  cordon workspace pull api ./api-after      # with $CORDON_HOST set`,
		Args: noArgs,
	}
	c.AddCommand(
		workspaceSub(stdio, "ls", "ls", "list the tenant's workspaces (and the session running in each)", 0, workspaceLs,
			"  cordon --host unix:///run/cordon/cordon.sock workspace ls"),
		workspaceSub(stdio, "push NAME DIR", "push", "fill the new or empty workspace NAME from the directory DIR here (links as links; special files refused)", 2, workspacePush,
			"  cordon workspace push api ./api && id=$(cordon session start --workspace api)"),
		workspaceSub(stdio, "pull NAME DIR", "pull", "copy workspace NAME into DIR here, which must be new or empty (links as links; nothing outside DIR)", 2, workspacePull,
			"  cordon workspace pull api ./api-after"),
		workspaceSub(stdio, "rm NAME", "rm", "delete workspace NAME, in which no session runs", 1, workspaceRm,
			"  cordon workspace rm api"),
	)
	return c
}

func workspaceSub(stdio IO, use, name, short string, nargs int, run func(*cobra.Command, IO, *remote.Client, []string) error, example string) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != nargs {
				return errdefs.Usagef("workspace %s: want %d arguments (%s), got %d", name, nargs, use, len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := remoteOf(c)
			if err != nil {
				return err
			}
			if cl == nil {
				return errdefs.Usagef("workspace %s: a server's workspaces: needs --host (or $CORDON_HOST); here a workspace is the current directory", name)
			}
			return run(c, stdio, cl, args)
		},
	}
}

func workspaceLs(c *cobra.Command, stdio IO, cl *remote.Client, _ []string) error {
	list, err := cl.Workspaces(c.Context())
	if err != nil {
		return clientError(stdio, err)
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	for _, w := range list {
		fmt.Fprintf(tw, "%s\t%s\n", w.Name, w.Session)
	}
	return tw.Flush()
}

// workspacePush packs DIR (reached without links) and streams it to the server; a
// packing that fails ends the upload without the archive's end, which the server
// refuses rather than keep part of it.
func workspacePush(c *cobra.Command, stdio IO, cl *remote.Client, args []string) error {
	name, dir := args[0], args[1]
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		_, _, err := workspace.Pack(pw, dir, workspace.Limits{Bytes: pullMaxBytes, Entries: pullMaxEntries})
		pw.CloseWithError(err) // nil: the archive's end was written
		packed <- err
	}()
	w, err := cl.PutWorkspace(c.Context(), name, pr)
	pr.CloseWithError(errUploadEnded) // a packing still writing stops
	if perr := <-packed; perr != nil && !errors.Is(perr, errUploadEnded) {
		return errdefs.Invalidf("workspace push: %s: %w (the server kept nothing of it)", dir, perr)
	}
	if err != nil {
		return clientError(stdio, err)
	}
	fmt.Fprintln(stdio.Stdout, w.Name)
	return nil
}

// workspacePull unpacks the server's archive of NAME into DIR, made when missing (mode
// 0700) and otherwise empty: every entry is checked as the server checks an upload
// (no path out of DIR, links kept inside it, no special files, bounded). A refused or
// cut archive removes what it made.
func workspacePull(c *cobra.Command, stdio IO, cl *remote.Client, args []string) error {
	name, dir := args[0], args[1]
	made := false
	if err := os.Mkdir(dir, 0o700); err == nil {
		made = true
	} else if !errors.Is(err, os.ErrExist) {
		return errdefs.Invalidf("workspace pull: %w", err)
	} else if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return errdefs.Usagef("workspace pull: %s is not an empty directory", dir)
	}
	body, err := cl.OpenWorkspace(c.Context(), name)
	if err != nil {
		if made {
			os.Remove(dir)
		}
		return clientError(stdio, err)
	}
	defer body.Close()
	st, err := workspace.Unpack(body, dir, workspace.Limits{Bytes: pullMaxBytes, Entries: pullMaxEntries})
	if err != nil {
		if made {
			_ = linux.RemoveTree(dir)
		}
		return errdefs.CannotRun(fmt.Errorf("workspace pull %s: %w (nothing of it is kept)", name, err))
	}
	fmt.Fprintf(stdio.Stdout, "%s: %d entries, %d bytes\n", dir, st.Entries, st.Bytes)
	return nil
}

func workspaceRm(c *cobra.Command, stdio IO, cl *remote.Client, args []string) error {
	w, err := cl.DeleteWorkspace(c.Context(), args[0])
	if err != nil {
		return clientError(stdio, err)
	}
	fmt.Fprintln(stdio.Stdout, w.Name)
	return nil
}
