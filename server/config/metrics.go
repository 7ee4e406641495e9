package config

import (
	"net"
	"net/netip"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// Metrics is the listener GET /metrics is served on, apart from the API: plain HTTP,
// without authentication, on a loopback address only. Metrics name every tenant, so
// no tenant's credential may read them (an auditor of one tenant would learn of the
// others); the operator's Prometheus scrapes them on the host, or through a tunnel
// or proxy of the operator's own.
type Metrics struct {
	Address string // host:port; host a loopback IP address (127.0.0.0/8 or ::1)
	Pos     Pos
}

func decodeMetrics(d *strictyaml.Decoder, n *yaml.Node) *Metrics {
	m := &Metrics{Pos: strictyaml.PosOf(n)}
	var addr *yaml.Node
	d.Mapping(n, "listen.metrics",
		strictyaml.Field{Name: "address", Decode: func(v *yaml.Node) { addr = v }},
	)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if addr == nil {
		d.At(n, "listen.metrics: missing \"address\" (a loopback host:port, such as 127.0.0.1:9464)")
		return m
	}
	s := d.Str(addr, "listen.metrics.address")
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		d.At(addr, "listen.metrics.address: %q: want host:port", s)
		return m
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil {
		d.At(addr, "listen.metrics.address: %q: the port is not a number from 0 to 65535", s)
		return m
	} else if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		d.At(addr, "listen.metrics.address: %q is not a loopback address (127.0.0.1, ::1): metrics name every tenant and are served without a credential", s)
		return m
	} else {
		m.Address = net.JoinHostPort(ip.String(), strconv.FormatUint(p, 10))
	}
	return m
}
