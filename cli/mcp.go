package cli

import (
	"github.com/spf13/cobra"
)

func newMCPCmd(stdio IO) *cobra.Command {
	var o sessionStartOptions
	c := &cobra.Command{
		Use:   "mcp [flags]",
		Short: "serve an agent over MCP (stdio): its shell and files, in one session",
		Long: `Serves the Model Context Protocol on stdin and stdout, for an agent's MCP client: one
session, started from the contract in force as cordon session start starts one, whose tools
(exec, read_file, write_file, edit_file, list_files, changes; checkpoint and rollback with
--stage; gate when the contract has gates) all run inside the sandbox and are recorded in
its audit log. The session stops, and its log is sealed, when the
connection ends: end of input, the client gone, SIGTERM, or this process killed
(docs/mcp.md).`,
		Example: `  cordon mcp -c cordon.yaml
  {"mcpServers": {"cordon": {"command": "cordon", "args": ["mcp", "-c", "cordon.yaml"]}}}`,
		Args: noArgs,
		// --host is refused before this runs: a client reaches a server's MCP
		// endpoint (/v1/mcp) directly, over HTTP (docs/mcp.md).
		RunE: func(c *cobra.Command, args []string) error { return serveMCP(c.Context(), stdio, o) },
	}
	f := c.Flags()
	contractFlag(f, &o.file)
	backendFlag(f, &o.backend)
	f.StringVar(&o.auditDir, "audit-dir", envOr("CORDON_AUDIT_DIR", ""), "audit root `DIR` ($CORDON_AUDIT_DIR)")
	o.gates = gatesFlag(f)
	f.BoolVar(&o.stage, "stage", false, "stage the workspace: writes go to an overlay, applied or discarded after the session (docs/sessions.md)")
	return c
}
