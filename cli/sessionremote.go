package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
)

// maxContract bounds the contract sent to a server: its request body limit.
const maxContract = 1 << 20

// sessionStartRemote starts a session on the server --host names, in its workspace
// --workspace, and prints its id, as sessionStart does here. The contract of -c is
// sent (its YAML); without -c the server uses the tenant's base contract.
func sessionStartRemote(c *cobra.Command, stdio IO, o sessionStartOptions) error {
	for _, name := range []string{"audit-dir", "gates"} {
		if c.Flags().Changed(name) {
			return errdefs.Usagef("session start: --%s is the server's to choose; not with --host", name)
		}
	}
	req := api.StartRequest{Workspace: o.workspace, Stage: o.stage, Pool: o.pool}
	if c.Flags().Changed("backend") || os.Getenv("CORDON_BACKEND") != "" {
		req.Backend = o.backend // else the server's default
	}
	if o.file != "" {
		yaml, err := readContract(o.file)
		if err != nil {
			return reportRunError(stdio, err)
		}
		req.Contract = yaml
	}
	cl, err := dial(hostOf(c))
	if err != nil {
		return err
	}
	s, err := cl.Start(c.Context(), req)
	if err != nil {
		return clientError(stdio, err)
	}
	fmt.Fprintln(stdio.Stdout, s.ID())
	return nil
}

// readContract reads the contract file to send, at most maxContract bytes.
func readContract(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", errdefs.Invalidf("%w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxContract+1))
	if err != nil {
		return "", errdefs.Invalidf("%w", err)
	}
	if len(data) > maxContract {
		return "", errdefs.Invalidf("%s: over %d bytes, more than a server takes", file, maxContract)
	}
	return string(data), nil
}

// sessionLsRemote lists the tenant's sessions on the server --host names, as
// sessionLs lists this host's.
func sessionLsRemote(c *cobra.Command, stdio IO, asJSON bool) error {
	cl, err := dial(hostOf(c))
	if err != nil {
		return err
	}
	list, err := cl.List(c.Context())
	if err != nil {
		return clientError(stdio, err)
	}
	out := []sessionJSON{}
	for _, s := range list {
		out = append(out, sessionJSON{ID: s.ID, Alive: s.State == "running", State: s.State, Started: s.Started, Backend: s.Backend, Workspace: s.Workspace,
			Ended: s.Ended, remote: true})
	}
	return printSessions(stdio, out, asJSON)
}
