//go:build !noengines || !linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server"
	"github.com/cordonhq/cordon/server/auth"
	"github.com/cordonhq/cordon/server/config"
)

// serve runs `cordon serve --config file` until SIGTERM or SIGINT.
func serve(ctx context.Context, stdio IO, file string, check bool, logFormat string) error {
	cfg, err := config.Load(file)
	if err == nil {
		err = server.CheckConfig(cfg)
	}
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
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	defer reloadOnHUP(ctx, srv, file, log)()
	if err := srv.Serve(ctx); err != nil {
		return errdefs.CannotRun(err)
	}
	return nil
}

// reloadOnHUP reads the config again at each SIGHUP until ctx ends (or the returned
// stop), and has the server take its credentials (server.Reload); a config that does
// not load, or changes more than credentials, is logged and nothing is taken.
func reloadOnHUP(ctx context.Context, srv *server.Server, file string, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
			}
			cfg, err := config.Load(file)
			if err == nil {
				err = server.CheckConfig(cfg)
			}
			if err == nil {
				err = srv.Reload(cfg)
			}
			if err != nil {
				log.Error("SIGHUP: the config was not reloaded; the server goes on with the one it has", "error", err.Error())
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// serveToken prints a new token and its config line.
func serveToken(stdio IO) error {
	tok, sum := auth.NewToken()
	fmt.Fprintln(stdio.Stdout, tok)
	fmt.Fprintln(stdio.Stdout, "token_sha256: "+sum)
	return nil
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
