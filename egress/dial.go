package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cordonhq/cordon/egress/policy"
)

// maxAddrs bounds how many resolved addresses are checked and tried for one name.
const maxAddrs = 16

// errUnresolved marks a name that could not be resolved: no address was ever allowed, so
// the attempt is reported as denied, but to the client as unreachable rather than as a
// contract decision.
var errUnresolved = errors.New("cannot resolve host")

// check decides host:port the way the package doc describes: the name first, then each
// address the proxy resolved itself. It returns the Allow decisions, one per address that
// may be dialled, in resolver order; or none and the decision that denied (the first
// denied address's, when every address was denied), with errUnresolved when the lookup
// failed.
func (p *Proxy) check(ctx context.Context, host string, port uint16) ([]policy.Decision, policy.Decision, error) {
	d := p.cfg.Policy.Decide(policy.DecideArgs{Host: host, Port: port})
	switch d.Verdict {
	case policy.Allow:
		return []policy.Decision{d}, d, nil
	case policy.Resolve:
	default:
		d.Verdict = policy.Deny // anything unexpected denies
		return nil, d, nil
	}
	lctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	addrs, err := p.cfg.Resolver.LookupNetIP(lctx, "ip", d.Host)
	if err != nil || len(addrs) == 0 {
		if err == nil {
			err = errors.New("no addresses")
		}
		deny := policy.Decision{Host: d.Host, Reason: fmt.Sprintf("cannot resolve host %q", d.Host), Category: policy.Unresolvable}
		return nil, deny, fmt.Errorf("%w %q: %w", errUnresolved, d.Host, err)
	}
	var allowed []policy.Decision
	var firstDeny policy.Decision
	for i, a := range addrs {
		if i == maxAddrs {
			break
		}
		// Resolvers may return IPv4 answers in IPv4-mapped form; what is dialled is the
		// IPv4 address, so that is what is checked.
		ad := p.cfg.Policy.Decide(policy.DecideArgs{Host: d.Host, Port: port, Addr: a.Unmap()})
		switch {
		case ad.Verdict == policy.Allow:
			allowed = append(allowed, ad)
		case firstDeny.Reason == "":
			ad.Verdict = policy.Deny
			firstDeny = ad
		}
	}
	if len(allowed) == 0 {
		return nil, firstDeny, nil
	}
	return allowed, allowed[0], nil
}

// dialAllowed connects to the first of the allowed addresses that answers, on port. It
// dials a netip.AddrPort, never a name, so the address dialled is the address checked.
func (p *Proxy) dialAllowed(ctx context.Context, allowed []policy.Decision, port uint16) (*idleConn, policy.Decision, error) {
	var errs []error
	for _, d := range allowed {
		if d.Verdict != policy.Allow || !d.Addr.IsValid() {
			continue // defence in depth: never dial what was not allowed
		}
		dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		c, err := p.dial(dctx, netip.AddrPortFrom(d.Addr, port))
		cancel()
		if err == nil {
			return newIdleConn(c, p.cfg.IdleTimeout), d, nil
		}
		errs = append(errs, err)
	}
	last := policy.Decision{}
	if len(allowed) > 0 {
		last = allowed[len(allowed)-1]
	}
	if len(errs) == 0 {
		return nil, last, errors.New("no address to dial")
	}
	return nil, last, fmt.Errorf("connecting: %w", errors.Join(errs...))
}

// connect is check then dialAllowed. With a nil conn and nil error the attempt was denied
// by d; with a non-nil error it was unreachable (d.Verdict says whether it had been
// allowed).
func (p *Proxy) connect(ctx context.Context, host string, port uint16) (*idleConn, policy.Decision, error) {
	allowed, d, err := p.check(ctx, host, port)
	if len(allowed) == 0 {
		return nil, d, err
	}
	return p.dialAllowed(ctx, allowed, port)
}

// targetKey is the context key under which forwardHTTP hands the transport's dial the
// destination it checked.
type targetKey struct{}

// checkedTarget is what the plain-HTTP transport may dial: the authority it was asked
// for, and the addresses allowed for it.
type checkedTarget struct {
	authority string
	port      uint16
	allowed   []policy.Decision
}

// transportDial is the http.Transport's DialContext. It dials only the addresses checked
// for this request's authority, taken from the context, and refuses anything else.
func (p *Proxy) transportDial(ctx context.Context, network, addr string) (net.Conn, error) {
	t, ok := ctx.Value(targetKey{}).(*checkedTarget)
	if !ok || t.authority != addr || network != "tcp" {
		return nil, fmt.Errorf("egress transport: dial %s %s without a checked destination", network, addr)
	}
	c, _, err := p.dialAllowed(ctx, t.allowed, t.port)
	if err != nil {
		return nil, err
	}
	return c, nil
}
