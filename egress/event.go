package egress

import (
	"net"
	"strconv"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
)

// Values of [event.NetBody.Proto].
const (
	protoHTTP    = "http"
	protoConnect = "connect"
	protoSOCKS   = "socks5"
)

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

// attempt accumulates the body of one net.allow or net.deny event.
type attempt struct {
	ev    event.NetBody
	start time.Time
}

func newAttempt(proto string) *attempt {
	return &attempt{ev: event.NetBody{Proto: proto}, start: time.Now()}
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
	a.ev.Category, a.ev.SuggestedRule = "", ""
	if addr != nil {
		a.ev.Addr = addr.String()
	}
}

// deniedBy records the decision that denied the destination: its reason, its category
// and the rule that would allow it.
func (a *attempt) deniedBy(d policy.Decision) {
	a.ev.Reason, a.ev.Category = d.Reason, d.Category.String()
	a.ev.SuggestedRule = policy.SuggestRule(d, a.ev.Port)
}

// refused records a denial that no policy decision made (a malformed request, a failed
// check): no rule would allow it.
func (a *attempt) refused(c policy.Category, reason string) {
	a.ev.Reason, a.ev.Category, a.ev.SuggestedRule = reason, c.String(), ""
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

func (p *Proxy) emit(ev event.NetBody, allowed bool) {
	typ := event.NetDeny
	if allowed {
		typ = event.NetAllow
	} else {
		ev.Rule, ev.Why = "", ""
	}
	// An error may quote what a destination sent, an echoed credential included: neither
	// the event nor the debug log gets it.
	ev.Error = p.scrubText(ev.Error)
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
