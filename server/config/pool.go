package config

import (
	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// MaxPoolSize bounds a tenant's warm pool: each warm session is a running sandbox.
const MaxPoolSize = 64

// Pool is a tenant's warm pool: Size sessions started ahead of any request, on the
// tenant's base contract, each in a fresh workspace of its own, so that a start that
// names no workspace claims one at once (as agent-sandbox's warm pools and claims do).
type Pool struct {
	Size    int
	Backend string // bwrap, docker, containerd or auto; "" for auto
	Pos     Pos
}

// poolBackends are the backends a pool may name.
var poolBackends = []string{"auto", "bwrap", "docker", "containerd"}

func decodePool(d *strictyaml.Decoder, n *yaml.Node) *Pool {
	p := &Pool{Pos: strictyaml.PosOf(n)}
	d.Mapping(n, "pool",
		strictyaml.Field{Name: "size", Decode: func(v *yaml.Node) {
			if i, ok := d.Int(v, "pool.size", 1, MaxPoolSize); ok {
				p.Size = int(i)
			}
		}},
		strictyaml.Field{Name: "backend", Decode: func(v *yaml.Node) {
			p.Backend = d.Str(v, "pool.backend")
			for _, b := range poolBackends {
				if b == p.Backend {
					return
				}
			}
			d.At(v, "pool.backend: %q is not one of auto, bwrap, docker, containerd", p.Backend)
		}},
	)
	if n.Kind == yaml.MappingNode && !hasKey(n, "size") {
		d.At(n, "pool: missing \"size\"")
	}
	return p
}
