package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/egress"
	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// egressService is the run's egress proxy, the sandbox's only way out. It serves the
// listener the sandbox's process 1 handed over ([run.takeHello]: TCP on
// [sandbox.ProxyAddr], in the sandbox's network namespace) or, for a
// [sandbox.Backend.LoopbackEgress] backend, a loopback TCP port of the host's.
type egressService struct {
	proxy *egress.Proxy
	addr  string // the loopback address, or ""

	mu      sync.Mutex // mu guards closed and serving.
	closed  bool
	serving bool
	done    chan error
}

// loopback is a loopback TCP listener for the egress proxy and the token its clients
// must present (see [egress.Config.Token]).
type loopback struct {
	ln    net.Listener
	token string
}

// listenLoopback opens the run's loopback port and chooses its token, for a backend
// without a network namespace. It returns the proxy variables naming both.
func listenLoopback() (*loopback, []string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, errdefs.Unavailablef("egress proxy token: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, errdefs.Unavailablef("egress proxy port: %w", err)
	}
	lb := &loopback{ln: ln, token: hex.EncodeToString(b[:])}
	return lb, proxyEnv(tokenUser + ":" + lb.token + "@" + ln.Addr().String()), nil
}

// proxyPort opens the loopback port of a [sandbox.Backend.LoopbackEgress] backend's
// run, with the token redacted from the log; nil and [ProxyEnv] for other backends.
func (r *run) proxyPort() (*loopback, []string, error) {
	if !r.o.Backend.LoopbackEgress() {
		return nil, ProxyEnv(), nil
	}
	lb, env, err := listenLoopback()
	if err != nil {
		return nil, nil, err
	}
	// Closed by the proxy when it stops, or here when the run ends before it starts.
	r.undo.add("closing the egress proxy's port", func(context.Context) error { lb.ln.Close(); return nil })
	if err := r.log.Redactor().Add("CORDON_PROXY_TOKEN", lb.token); err != nil {
		return nil, nil, errdefs.Unavailablef("egress proxy token: %w", err)
	}
	return lb, env, nil
}

// tokenUser is the user name of the proxy URL; only the password (the token) is checked.
const tokenUser = "cordon"

// startEgress starts the proxy for plan's allowlist. It runs for every run, allowlist
// or not, so that every attempt to get out is recorded.
// intercept, when not nil, delivers the run's proxy credentials.
// lb, when not nil, is the loopback port to serve on (and is closed on failure);
// otherwise the proxy serves the listener process 1 hands over, once it has
// ([egressService.serve]).
func startEgress(plan *contract.Plan, sink event.Sink, log *slog.Logger, intercept *egress.Intercept, lb *loopback) (*egressService, error) {
	cfg := egress.Config{Events: sink, Logger: log, Intercept: intercept}
	if lb != nil {
		cfg.Token = lb.token
	}
	proxy, err := newProxy(plan, cfg)
	if err != nil {
		if lb != nil {
			lb.ln.Close()
		}
		return nil, err
	}
	s := &egressService{proxy: proxy, done: make(chan error, 1)}
	if lb != nil {
		s.addr = lb.ln.Addr().String()
		s.serve(lb.ln)
	}
	return s, nil
}

// serve serves ln until the proxy is closed; ln is closed then, or at once when the
// proxy already is. It is called once.
func (s *egressService) serve(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ln.Close()
		return
	}
	s.serving = true
	go func() {
		err := s.proxy.Serve(context.Background(), ln)
		if errors.Is(err, egress.ErrClosed) {
			ln.Close() // closed before it served
			err = nil
		}
		s.done <- err
	}()
}

// newProxy is the proxy for plan's allowlist with cfg's other settings.
func newProxy(plan *contract.Plan, cfg egress.Config) (*egress.Proxy, error) {
	pol, err := policy.New(plan.EgressRules())
	if err != nil {
		return nil, errdefs.Invalidf("network.allow: %w", err)
	}
	cfg.Policy = pol
	proxy, err := egress.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting egress proxy: %w", err)
	}
	return proxy, nil
}

// Close stops the proxy and every connection through it, and waits for them.
func (s *egressService) Close() error {
	s.mu.Lock()
	s.closed = true
	serving := s.serving
	s.mu.Unlock()
	err := s.proxy.Close()
	if serving {
		if serr := <-s.done; err == nil {
			err = serr
		}
	}
	return err
}

// ProxyEnv is what the sandbox's environment gets so that ordinary tools (curl, wget,
// git, go, pip, npm) use the proxy at [sandbox.ProxyAddr]. Programs that ignore it have no route out at all.
func ProxyEnv() []string {
	return append(proxyEnv(sandbox.ProxyAddr), "NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1")
}

// proxyEnv is the proxy variables for a proxy at authority ([userinfo@]host:port),
// without NO_PROXY: on a loopback port (no network namespace) the sandbox's loopback is
// the host's, which the profile does not let it reach directly, so every destination,
// local ones included, goes through the proxy and its rules.
func proxyEnv(authority string) []string {
	http := "http://" + authority
	socks := "socks5h://" + authority
	return []string{
		"HTTP_PROXY=" + http, "http_proxy=" + http,
		"HTTPS_PROXY=" + http, "https_proxy=" + http,
		"ALL_PROXY=" + socks, "all_proxy=" + socks,
	}
}
