package cli

import (
	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// `cordon serve` is defined here for every build; it runs in the full build only
// (serve_full.go): the noengines build, whose start-up is most of a warm `cordon
// exec`, links no server and hands `serve` to cordon-engines (delegated).

func newServeCmd(stdio IO) *cobra.Command {
	var file, logFormat string
	var check bool
	c := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "serve many tenants' agents over HTTP (unix socket, TCP with TLS)",
		Long: `Runs cordon as a daemon that tenants' harnesses call over HTTP: on a unix socket (local
users known by their uid) and on TCP with TLS (bearer tokens, client certificates). The
config file names the listeners and the tenants with their credentials (docs/serve.md).
SIGTERM or SIGINT stops it gracefully.

Each tenant has its own run, audit and workspace roots, a base contract its sessions
may only narrow, quotas and an optional warm pool; the API (sessions, gates, audit) is
described at /v1/openapi.json.

Exit status: 0 stopped by a signal, 1 invalid config (FILE:LINE:COL: message per
problem), 2 usage, 125 could not listen.`,
		Example: `  cordon serve --config /etc/cordon/serve.yaml
  cordon serve --config serve.yaml --check   # validate the config and exit
  cordon serve token                          # a new token and its token_sha256 line`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if file == "" {
				return errdefs.Usagef("serve: --config FILE is required")
			}
			return serve(c.Context(), stdio, file, check, logFormat)
		},
	}
	c.Flags().StringVar(&file, "config", "", "the server's config file (YAML)")
	c.Flags().BoolVar(&check, "check", false, "validate the config and exit")
	c.Flags().StringVar(&logFormat, "log-format", "json", "log format on stderr: json or text")
	c.AddCommand(newServeTokenCmd(stdio))
	return c
}

func newServeTokenCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "print a new bearer token and the token_sha256 line for the config",
		Long: `Prints a new bearer token (32 random bytes, base64url) on the first line, and on the
second the token_sha256 line a credential in the config takes. Give the token to the
tenant's harness; only the hash goes in the config.`,
		Example: `  cordon serve token`,
		Args:    noArgs,
		RunE:    func(*cobra.Command, []string) error { return serveToken(stdio) },
	}
}
