package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

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

This is the first slice: authentication and GET /v1/health and /v1/whoami. Sessions are
not served yet.

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
			cfg, err := config.Load(file)
			if err != nil {
				return configError(stdio, err)
			}
			if check {
				fmt.Fprintf(stdio.Stdout, "%s: valid\n", file)
				return nil
			}
			log, err := serveLogger(stdio, logFormat)
			if err != nil {
				return err
			}
			srv, err := server.New(cfg, log)
			if err != nil {
				return errdefs.CannotRun(err)
			}
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := srv.Serve(ctx); err != nil {
				return errdefs.CannotRun(err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&file, "config", "", "the server's config file (YAML)")
	c.Flags().BoolVar(&check, "check", false, "validate the config and exit")
	c.Flags().StringVar(&logFormat, "log-format", "json", "log format on stderr: json or text")
	c.AddCommand(newServeTokenCmd(stdio))
	return c
}

// configError prints every problem of an invalid config, one per line, and exits 1.
func configError(stdio IO, err error) error {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return err
	}
	var j interface{ Unwrap() []error }
	errs := []error{err}
	if errors.As(err, &j) {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		fmt.Fprintln(stdio.Stderr, e)
	}
	return errdefs.Exit(errdefs.ExitFailure)
}

func serveLogger(stdio IO, format string) (*slog.Logger, error) {
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(stdio.Stderr, nil)), nil
	case "text":
		return slog.New(slog.NewTextHandler(stdio.Stderr, nil)), nil
	}
	return nil, errdefs.Usagef("serve: --log-format: want json or text, got %q", format)
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
		RunE: func(*cobra.Command, []string) error {
			tok, sum := auth.NewToken()
			fmt.Fprintln(stdio.Stdout, tok)
			fmt.Fprintln(stdio.Stdout, "token_sha256: "+sum)
			return nil
		},
	}
}
