package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/secret"
)

// Errors returned by Proxy methods.
var (
	// ErrClosed is returned by [Proxy.Serve] on a Proxy that was closed.
	ErrClosed = errors.New("egress proxy closed")
)

// Defaults for zero [Config] fields.
const (
	DefaultMaxConns         = 256
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultDialTimeout      = 10 * time.Second
	DefaultHandshakeTimeout = 30 * time.Second
)

// Resolver looks up the addresses of a host name. It is implemented by *net.Resolver.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a [Proxy]. Zero fields take the documented defaults.
type Config struct {
	// Policy decides every destination. Nil denies everything.
	Policy *policy.Policy
	// Resolver looks names up. Nil means [net.DefaultResolver].
	Resolver Resolver
	// Events receives one [event.NetAllow] or [event.NetDeny] per attempt, with a
	// [event.NetBody] body. Nil discards them.
	Events event.Sink
	// Logger receives operational logs (not the audit trail). Nil discards them.
	Logger *slog.Logger
	// MaxConns bounds concurrent client connections (0 means [DefaultMaxConns]). One
	// more is answered with 503 or a SOCKS5 general failure, and a deny event.
	MaxConns int
	// IdleTimeout closes a tunnel or keep-alive connection with no traffic in either
	// direction for this long (0 means [DefaultIdleTimeout]).
	IdleTimeout time.Duration
	// DialTimeout bounds each name lookup and each upstream dial (0 means
	// [DefaultDialTimeout]).
	DialTimeout time.Duration
	// HandshakeTimeout bounds reading a request head, a SOCKS5 greeting and request, or a
	// TLS ClientHello (0 means [DefaultHandshakeTimeout]).
	HandshakeTimeout time.Duration
	// Intercept, when set, delivers credentials by proxy to its hosts (see [Intercept]).
	Intercept *Intercept
	// Token, when set, is the secret every client must present (see auth.go): for a
	// proxy on a TCP port that other local processes can reach. Empty for a listener
	// in the sandbox's own network namespace, which only the sandbox reaches.
	Token string
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("max conns %d is negative", c.MaxConns))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"idle timeout", c.IdleTimeout}, {"dial timeout", c.DialTimeout}, {"handshake timeout", c.HandshakeTimeout}} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("%s %s is negative", f.name, f.d))
		}
	}
	if c.Intercept != nil {
		if err := c.Intercept.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Events == nil {
		c.Events = event.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return c
}

// Proxy is the egress proxy. Create it with [New], run it with [Proxy.Serve] on one or
// more listeners, stop it with [Proxy.Close]. Its methods are safe for concurrent use.
type Proxy struct {
	cfg       Config
	transport *http.Transport
	intercept map[string][]Credential // Config.Intercept's credentials by normalised host
	forms     *secret.Matcher         // every form of every credential's value
	back      []string                // value, placeholder pairs of every credential

	// dial connects to one checked address; tests replace it before Serve.
	dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)

	slots   chan struct{} // one token per client connection being served (MaxConns)
	refusal chan struct{} // one token per over-limit connection being answered

	ctx    context.Context // done when Close is called
	cancel context.CancelFunc

	mu     sync.Mutex // mu guards closed, and orders wg.Add against Close's wg.Wait.
	closed bool
	wg     sync.WaitGroup // running Serve calls, each of which waits for its connections
}

// New returns a Proxy for cfg, or the errors of [Config.Validate].
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("egress config: %w", err)
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		cfg:     cfg,
		slots:   make(chan struct{}, cfg.MaxConns),
		refusal: make(chan struct{}, cfg.MaxConns),
		ctx:     ctx,
		cancel:  cancel,
	}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout}
	p.dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		return dialer.DialContext(ctx, "tcp", addr.String())
	}
	p.transport = p.newTransport()
	p.intercept = cfg.Intercept.byHost()
	p.forms, p.back = cfg.Intercept.forms()
	return p, nil
}

// Serve accepts connections on ln until ctx is done, [Proxy.Close] is called, or Accept
// fails for good. It then closes ln and every connection it accepted, waits for them, and
// returns nil, or the accept error. It returns [ErrClosed] after Close.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopOnClose := context.AfterFunc(p.ctx, cancel)
	defer stopOnClose()
	stopLn := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopLn()

	var conns sync.WaitGroup
	err := p.accept(ctx, ln, &conns)
	cancel()
	conns.Wait()
	return err
}

// accept runs the accept loop, starting one goroutine per connection on conns.
func (p *Proxy) accept(ctx context.Context, ln net.Listener, conns *sync.WaitGroup) error {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accepting: %w", err)
			}
			// EMFILE and friends: wait and retry rather than spin or give up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.cfg.Logger.Warn("egress accept failed; retrying", logKeyError, err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		select {
		case p.slots <- struct{}{}:
		default:
			p.refuse(ctx, c, conns)
			continue
		}
		conns.Go(func() {
			defer func() { <-p.slots }()
			p.handle(ctx, c)
		})
	}
}

// handle serves one client connection: it sniffs the first byte (0x05 is SOCKS5, anything
// else HTTP) and hands the connection to that protocol.
func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.Close() }) // unblocks all I/O on shutdown
	defer stop()
	defer c.Close()

	cc := newIdleConn(c, p.cfg.IdleTimeout)
	br := getReader(cc)
	defer putReader(br)
	cc.setHard(time.Now().Add(p.cfg.HandshakeTimeout))
	first, err := br.Peek(1)
	if err != nil {
		return // closed or silent before saying anything: not an attempt
	}
	if first[0] == socksVersion {
		p.serveSOCKS(ctx, cc, br)
		return
	}
	p.serveHTTP(ctx, cc, br)
}

// refuse answers a connection over the MaxConns limit with 503 or a SOCKS5 general failure
// and a deny event. It runs at most MaxConns refusals at once; past that it closes the
// connection straight away, so a flood cannot grow goroutines without bound.
func (p *Proxy) refuse(ctx context.Context, c net.Conn, conns *sync.WaitGroup) {
	reason := fmt.Sprintf("too many connections (limit %d)", p.cfg.MaxConns)
	select {
	case p.refusal <- struct{}{}:
	default:
		c.Close()
		p.emit(event.NetBody{Reason: reason}, false)
		return
	}
	conns.Go(func() {
		defer func() { <-p.refusal }()
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		defer c.Close()
		cc := newIdleConn(c, p.cfg.IdleTimeout)
		cc.setHard(time.Now().Add(min(p.cfg.HandshakeTimeout, 5*time.Second)))
		br := getReader(cc)
		defer putReader(br)
		ev := event.NetBody{Reason: reason}
		first, err := br.Peek(1)
		switch {
		case err != nil:
			p.emit(ev, false)
		case first[0] == socksVersion:
			ev.Proto = protoSOCKS
			p.refuseSOCKS(cc, br, ev)
		default:
			ev.Proto = protoHTTP
			p.refuseHTTP(cc, br, ev)
		}
	})
}

// Close stops every Serve call, closes all connections, waits for them to finish, and
// releases idle upstream connections. It is idempotent and always returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
	return nil
}

// readerPool holds the 64 KiB readers used for client connections; the size bounds a
// request head.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, maxHead) }}

const maxHead = 64 << 10

func getReader(r io.Reader) *bufio.Reader {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readerPool.Put(br)
}
