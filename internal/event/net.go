package event

import "time"

// NetBody is the body of net.allow and net.deny, which the egress proxy emits: exactly
// one per attempt, that is per CONNECT, per SOCKS5 request, and per plain-HTTP request
// (several may share one keep-alive connection). A denied attempt is reported at once;
// an allowed one when it ends, so that its byte counts are known.
type NetBody struct {
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
	// Category is the kind of denial as shown to the workload ("not in network.allow",
	// "port not allowed", "private address", "resolves to a forbidden address", ...);
	// empty when the attempt was allowed.
	Category string `json:"category,omitempty"`
	// SuggestedRule is the contract rule that would allow this destination, in YAML flow
	// syntax; empty when allowed or when no rule could.
	SuggestedRule string `json:"suggested_rule,omitempty"`
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

// NetDenySummaryBody is the body of net.deny.summary: denials the log counts instead of
// itemizing, once a run has itemized its budget of net.deny lines (a burst, then a steady
// rate; docs/audit.md). One line stands for the denials of one command (its Cmd; ""
// for none running) since that command's previous summary: written at most once a
// second while a flood lasts, and at the command's end and the run's end for the rest,
// so that the net.deny lines and the denied counts of the summaries add up to every
// denied attempt.
type NetDenySummaryBody struct {
	// Denied is how many denied attempts this line stands for, none of them a net.deny
	// line of its own.
	Denied int64 `json:"denied"`
	// Reasons counts them by kind: the denial's category ("not in network.allow", …),
	// or its reason when it has none ("too many connections (limit 256)"); at most
	// 16 kinds, the rest counted under "other".
	Reasons map[string]int64 `json:"reasons"`
	// Destinations is how many distinct destinations ("host:port") they asked for; at
	// least that many when DestinationsAtLeast is set (past 1024 the line stops telling
	// them apart).
	Destinations        int  `json:"destinations"`
	DestinationsAtLeast bool `json:"destinations_at_least,omitempty"`
	// Examples are the first few distinct destinations (at most 5), as net.deny would
	// name them ("a malformed request" for one that named none).
	Examples []string `json:"examples"`
	// First and Last are when the first and the last of them were denied (RFC 3339).
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// NetAllowSummaryBody is the body of net.allow.summary: allowed attempts the log counts
// instead of itemizing, once a run has itemized its budget of net.allow lines (a burst,
// then a steady rate, a budget apart from the deny budget; docs/audit.md). Like
// [NetDenySummaryBody], one line stands for the allowed attempts of one command (its
// Cmd; "" for none running) since that command's previous summary, so that the
// net.allow lines and the allowed counts of the summaries add up to every allowed
// attempt. Every attempt is counted the same way, whether it moved bytes or carried a
// credential: what it moved is summed here, and where it went is named in Named (or
// counted in Destinations past that bound).
type NetAllowSummaryBody struct {
	// Allowed is how many allowed attempts this line stands for, none of them a
	// net.allow line of its own.
	Allowed int64 `json:"allowed"`
	// BytesUp and BytesDown sum the bytes those attempts sent to and received from
	// their destinations, as net.allow counts them.
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
	// Intercepted counts the attempts on which the proxy terminated TLS to deliver a
	// credential, and Requests the HTTP requests it forwarded on them.
	Intercepted int64 `json:"intercepted,omitempty"`
	Requests    int64 `json:"requests,omitempty"`
	// Failed counts the attempts that failed (net.allow's error: unreachable, reset).
	Failed int64 `json:"failed,omitempty"`
	// Destinations is how many distinct destinations ("host:port") they reached; at
	// least that many when DestinationsAtLeast is set (past 1024 the line stops telling
	// them apart).
	Destinations        int  `json:"destinations"`
	DestinationsAtLeast bool `json:"destinations_at_least,omitempty"`
	// Named gives the first distinct destinations (at most 64) by name, each with its
	// own attempts and bytes, and past those, up to 256 in all, destinations sent bytes
	// or a credential (named from that attempt on); Other sums the attempts to every
	// destination not named (nil when there are none).
	Named map[string]AllowedTo `json:"named"`
	Other *AllowedTo           `json:"other,omitempty"`
	// First and Last are when the first and the last of them ended (RFC 3339).
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// AllowedTo is what a [NetAllowSummaryBody] counts of the attempts to one destination
// (or to the destinations past those it names).
type AllowedTo struct {
	Attempts    int64 `json:"attempts"`
	BytesUp     int64 `json:"bytes_up"`
	BytesDown   int64 `json:"bytes_down"`
	Intercepted int64 `json:"intercepted,omitempty"`
}
