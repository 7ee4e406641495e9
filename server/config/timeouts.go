package config

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// Timeouts bound how long the server's listeners wait on a client (listen.timeouts):
// Request for a whole request, body included, and Response for an answer, or, on a
// streamed answer (an export, a follow), for each write. The requests that lift them
// (an exec's stream, a start, a stop) are docs/serve.md's. A zero field takes its
// default ([DefaultTimeouts]), so a Config built in Go needs none.
type Timeouts struct {
	Request  time.Duration
	Response time.Duration
	Pos      Pos
}

// DefaultTimeouts are listen.timeouts when the config sets none.
func DefaultTimeouts() Timeouts { return Timeouts{Request: 30 * time.Second, Response: time.Minute} }

// WithDefaults is t with each zero field set to its default.
func (t Timeouts) WithDefaults() Timeouts {
	d := DefaultTimeouts()
	if t.Request == 0 {
		t.Request = d.Request
	}
	if t.Response == 0 {
		t.Response = d.Response
	}
	return t
}

// maxTimeout bounds listen.timeouts: a slow client holds a connection slot this long.
const maxTimeout = time.Hour

// decodeTimeouts reads listen.timeouts.
func decodeTimeouts(d *strictyaml.Decoder, n *yaml.Node) Timeouts {
	t := DefaultTimeouts()
	t.Pos = strictyaml.PosOf(n)
	d.Mapping(n, "listen.timeouts",
		strictyaml.Field{Name: "request", Decode: func(v *yaml.Node) {
			t.Request = quotaDuration(d, v, "listen.timeouts.request", maxTimeout, t.Request)
		}},
		strictyaml.Field{Name: "response", Decode: func(v *yaml.Node) {
			t.Response = quotaDuration(d, v, "listen.timeouts.response", maxTimeout, t.Response)
		}},
	)
	return t
}
