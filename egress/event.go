package egress

import (
	"net"
	"strconv"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
)

// Values of [ConnEvent.Proto].
const (
	protoHTTP    = "http"
	protoConnect = "connect"
	protoSOCKS   = "socks5"
)

// ConnEvent is the body of the [event.NetAllow] and [event.NetDeny] events: exactly one per
// attempt, that is per CONNECT, per SOCKS5 request, and per plain-HTTP request (several
// may share one keep-alive connection). A denied attempt is reported at once; an allowed
// one when it ends, so that its byte counts are known. Field names are part of the audit
// schema.
type ConnEvent struct {
	// Host is the requested host, normalised; as given (cut to 255 bytes) when malformed,
	// and empty when the request could not be read far enough to name one.
	Host string `json:"host"`
	// Port is the requested port, 0 when unknown.
	Port uint16 `json:"port"`
	// Addr is the address that was dialled ("ip:port"); empty when none was.
	Addr string `json:"addr,omitempty"`
	// Proto is how the client asked: "http", "connect" or "socks5"; empty when the
	// connection was refused before it said.
	Proto string `json:"proto"`
	// Rule is the contract rule that allowed the connection, e.g. "*.example.com:443".
	Rule string `json:"rule,omitempty"`
	// Why is that rule's justification from the contract.
	Why string `json:"why,omitempty"`
	// Reason says why the attempt was denied; empty when it was allowed.
	Reason string `json:"reason,omitempty"`
	// Error says why an allowed attempt failed (unreachable, reset, timed out), if it did.
	Error string `json:"error,omitempty"`
	// BytesUp counts bytes sent to the destination: the tunnel payload, or the request
	// body of a plain-HTTP request.
	BytesUp int64 `json:"bytes_up"`
	// BytesDown counts bytes received from the destination: the tunnel payload, or the
	// response body of a plain-HTTP request.
	BytesDown int64 `json:"bytes_down"`
	// Intercepted is true when the proxy terminated TLS to deliver a credential (deliver:
	// proxy); the credential's value never appears in the event.
	Intercepted bool `json:"intercepted,omitempty"`
	// Requests counts the HTTP requests forwarded on an intercepted connection.
	Requests int `json:"requests,omitempty"`
	// DurationMS is the time from reading the request to the end of the attempt.
	DurationMS int64 `json:"duration_ms"`
}

// Log field keys.
const (
	logKeyType   = "type"
	logKeyHost   = "host"
	logKeyPort   = "port"
	logKeyProto  = "proto"
	logKeyAddr   = "addr"
	logKeyReason = "decision_reason"
	logKeyError  = "error"
)

// attempt accumulates one ConnEvent.
type attempt struct {
	ev    ConnEvent
	start time.Time
}

func newAttempt(proto string) *attempt {
	return &attempt{ev: ConnEvent{Proto: proto}, start: time.Now()}
}

// target records the requested destination: the normalised host when there is one, else
// the raw host as given, bounded.
func (a *attempt) target(raw string, port uint16, d policy.Decision) {
	a.ev.Host, a.ev.Port = d.Host, port
	if a.ev.Host == "" {
		a.ev.Host = bound(raw, 255)
	}
}

// allowedBy records the decision that allowed the dialled address.
func (a *attempt) allowedBy(d policy.Decision, addr net.Addr) {
	a.ev.Rule, a.ev.Why, a.ev.Reason = d.Rule.String(), d.Rule.Why, ""
	if addr != nil {
		a.ev.Addr = addr.String()
	}
}

// hostport is the destination as shown in a denial: "host:port", IPv6 in brackets.
func (a *attempt) hostport() string {
	return net.JoinHostPort(printable(a.ev.Host), strconv.Itoa(int(a.ev.Port)))
}

// emit sends the attempt's event: net.allow when allowed is true, else net.deny.
func (p *Proxy) emitAttempt(a *attempt, allowed bool) {
	a.ev.DurationMS = time.Since(a.start).Milliseconds()
	p.emit(a.ev, allowed)
}

func (p *Proxy) emit(ev ConnEvent, allowed bool) {
	typ := event.NetDeny
	if allowed {
		typ = event.NetAllow
	} else {
		ev.Rule, ev.Why = "", ""
	}
	p.cfg.Events.Emit(event.Event{Type: typ, Time: time.Now(), Body: ev})
	p.cfg.Logger.Debug("egress attempt", logKeyType, string(typ), logKeyHost, ev.Host, logKeyPort, ev.Port,
		logKeyProto, ev.Proto, logKeyAddr, ev.Addr, logKeyReason, ev.Reason, logKeyError, ev.Error)
}

func bound(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// printable replaces bytes outside printable ASCII, so that text the client chose cannot
// forge lines in a response or a terminal.
func printable(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}
