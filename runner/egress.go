package runner

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/egress"
	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// maxSocketPath is the longest path a unix socket can be bound at (sun_path is 108
// bytes with its terminating NUL).
const maxSocketPath = 107

// egressService is the run's egress proxy, listening on a unix socket in the run
// directory: the sandbox's only way out.
type egressService struct {
	proxy  *egress.Proxy
	socket string
	done   chan error
}

// startEgress starts the proxy for plan's allowlist. It runs for every run, allowlist
// or not, so that every attempt to get out is recorded.
// intercept, when not nil, delivers the run's proxy credentials.
func startEgress(ctx context.Context, plan *contract.Plan, runDir string, sink event.Sink, log *slog.Logger, intercept *egress.Intercept) (*egressService, error) {
	pol, err := policy.New(plan.EgressRules())
	if err != nil {
		return nil, errdefs.Invalidf("network.allow: %w", err)
	}
	proxy, err := egress.New(egress.Config{Policy: pol, Events: sink, Logger: log, Intercept: intercept})
	if err != nil {
		return nil, fmt.Errorf("starting egress proxy: %w", err)
	}
	sock := filepath.Join(runDir, "egress.sock")
	if len(sock) > maxSocketPath {
		proxy.Close()
		return nil, errdefs.Unavailablef("the run directory %s is too long a path for a unix socket (%d bytes, at most %d); use a shorter run root (XDG_RUNTIME_DIR)", runDir, len(sock), maxSocketPath)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		proxy.Close()
		return nil, errdefs.Unavailablef("egress proxy socket: %w", err)
	}
	s := &egressService{proxy: proxy, socket: sock, done: make(chan error, 1)}
	go func() { s.done <- proxy.Serve(context.WithoutCancel(ctx), ln) }()
	return s, nil
}

// Close stops the proxy and every connection through it, and waits for them.
func (s *egressService) Close() error {
	err := s.proxy.Close()
	<-s.done
	return err
}

// ProxyEnv is what the sandbox's environment gets so that ordinary tools (curl, wget,
// git, go, pip, npm) use the bridge. Programs that ignore it have no route out at all.
func ProxyEnv() []string {
	http := "http://" + sandbox.BridgeAddr
	socks := "socks5h://" + sandbox.BridgeAddr
	noProxy := "localhost,127.0.0.1"
	return []string{
		"HTTP_PROXY=" + http, "http_proxy=" + http,
		"HTTPS_PROXY=" + http, "https_proxy=" + http,
		"ALL_PROXY=" + socks, "all_proxy=" + socks,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
	}
}
