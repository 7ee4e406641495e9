package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/local"
)

func tokenCmd(ctx context.Context, stdio IO, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "verify":
			return tokenVerify(stdio, args[1:])
		case "serve":
			return tokenServe(ctx, stdio, args[1:])
		}
	}
	fmt.Fprintln(stdio.Stderr, "Usage: cordon token verify TOKEN|- [--scope S] | cordon token serve --listen ADDR\n\n"+
		"  verify   check a token cordon's local provider issued: exit 0 active, 1 inactive\n"+
		"  serve    an RFC 7662 introspection endpoint (POST /introspect) for internal services")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return nil
	}
	return errdefs.Exit(errdefs.ExitUsage)
}

func tokenVerify(stdio IO, args []string) error {
	fs := newFlags("token verify", "token verify [--scope \"S1 S2\"] TOKEN|-\n\n\"-\" reads the token from stdin, which keeps it out of the process list.\nExit status: 0 active, 1 inactive (revoked, expired, unknown, or missing a scope), 2 usage.", stdio.Stderr)
	scope := fs.String("scope", "", "space-separated `scopes` the token must carry")
	root := fs.String("ledger", creds.DefaultRoot(), "credential ledger `DIR`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errdefs.Usagef("token verify: want one TOKEN or -")
	}
	tok := fs.Arg(0)
	if tok == "-" {
		line, err := bufio.NewReader(stdio.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return errdefs.Usagef("token verify: no token on stdin")
		}
		tok = strings.TrimSpace(line)
	}
	info, err := local.Verify(*root, tok, strings.Fields(*scope), time.Now())
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

func tokenServe(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("token serve", "token serve --listen ADDR", stdio.Stderr)
	listen := fs.String("listen", "127.0.0.1:8200", "`address` to serve POST /introspect on (plain HTTP: keep it on loopback or put TLS in front)")
	root := fs.String("ledger", creds.DefaultRoot(), "credential ledger `DIR`")
	if err := parse(fs, args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /introspect", local.NewHandler(local.HandlerConfig{Root: *root}))
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := withSignals(ctx)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(stdio.Stderr, "cordon: token introspection on http://%s/introspect\n", *listen)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
