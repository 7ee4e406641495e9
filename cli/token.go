package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/local"
)

func newTokenCmd(stdio IO) *cobra.Command {
	c := group(stdio, &cobra.Command{
		Use:   "token COMMAND",
		Short: "verify tokens cordon issued, or serve RFC 7662 introspection",
		Long:  "Verifies the tokens cordon's local credential provider issued, or serves RFC 7662 introspection for them.",
		Example: `  echo "$TOKEN" | cordon token verify --scope "repo:read" -
  cordon token serve --listen 127.0.0.1:8200`,
	})
	c.AddCommand(newTokenVerifyCmd(stdio), newTokenServeCmd(stdio))
	return c
}

func newTokenVerifyCmd(stdio IO) *cobra.Command {
	var scope, root string
	c := &cobra.Command{
		Use:   "verify [flags] TOKEN|-",
		Short: "check a token cordon's local provider issued: exit 0 active, 1 inactive",
		Long: `Checks a token cordon's local provider issued. "-" reads the token from stdin, which keeps
it out of the process list.

Exit status: 0 active, 1 inactive (revoked, expired, unknown, or missing a scope), 2 usage.`,
		Example: `  echo "$TOKEN" | cordon token verify -
  cordon token verify --scope "repo:read repo:write" - < token.txt`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errdefs.Usagef("token verify: want one TOKEN or -")
			}
			return tokenVerify(stdio, root, scope, args[0])
		},
	}
	c.Flags().StringVar(&scope, "scope", "", "space-separated `scopes` the token must carry")
	c.Flags().StringVar(&root, "ledger", creds.DefaultRoot(), "credential ledger `DIR`")
	return c
}

func tokenVerify(stdio IO, root, scope, tok string) error {
	if tok == "-" {
		line, err := bufio.NewReader(stdio.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return errdefs.Usagef("token verify: no token on stdin")
		}
		tok = strings.TrimSpace(line)
	}
	info, err := local.Verify(root, tok, strings.Fields(scope), time.Now())
	if errors.Is(err, local.ErrInactive) {
		fmt.Fprintf(stdio.Stdout, "inactive: %v\n", err)
		return errdefs.Exit(errdefs.ExitFailure)
	}
	if err != nil {
		return errdefs.CannotRun(fmt.Errorf("token verify: %w", err))
	}
	fmt.Fprintf(stdio.Stdout, "active: %s of run %s, scopes %q, expires %s\n", info.Name, info.Run, info.Scopes, info.ExpiresAt.UTC().Format(time.RFC3339))
	return nil
}

func newTokenServeCmd(stdio IO) *cobra.Command {
	var listen, root string
	c := &cobra.Command{
		Use:   "serve [flags]",
		Short: "an RFC 7662 introspection endpoint (POST /introspect) for internal services",
		Long: `Serves an RFC 7662 introspection endpoint, POST /introspect, for the tokens cordon's local
provider issued. Plain HTTP: keep it on loopback or put TLS in front.`,
		Example: "  cordon token serve --listen 127.0.0.1:8200",
		Args:    noArgs,
		RunE:    func(c *cobra.Command, args []string) error { return tokenServe(c.Context(), stdio, listen, root) },
	}
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:8200", "`address` to serve POST /introspect on (plain HTTP: keep it on loopback or put TLS in front)")
	c.Flags().StringVar(&root, "ledger", creds.DefaultRoot(), "credential ledger `DIR`")
	return c
}

func tokenServe(ctx context.Context, stdio IO, listen, root string) error {
	mux := http.NewServeMux()
	mux.Handle("POST /introspect", local.NewHandler(local.HandlerConfig{Root: root}))
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := withSignals(ctx)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(stdio.Stderr, "cordon: token introspection on http://%s/introspect\n", listen)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
