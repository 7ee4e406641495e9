package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/strictyaml"
	"github.com/cordonhq/cordon/server/admit"
)

// Bounds of a tenant's warm pools: each warm session is a running sandbox.
const (
	MaxPoolSize = 64 // warm sessions of one tenant, over all its pools
	MaxPools    = 16 // pools of one tenant
)

// Pool is one of a tenant's warm pools (`pools:`): Size sessions of one contract
// started ahead of any request, each in a fresh workspace of its own, so that a start
// asking for the pool claims one at once (as agent-sandbox's warm pools of a template
// and its claims do). The contract is the pool's file (Contract) or, without one, the
// tenant's base; either way it is checked against the base when the config is loaded.
type Pool struct {
	Name    string
	Size    int
	Backend string // bwrap, docker, containerd or auto; "" for auto
	Stage   bool   // staged sessions (checkpoint, rollback, apply)
	// Contract is the path of the pool's contract, "" for the tenant's base. YAML is
	// what [Load] read from it (the base's when Contract is ""), and Limits its
	// limits as compiled then: what a warm session asks of the tenant's quotas.
	Contract    string
	ContractPos Pos
	YAML        []byte
	Limits      contract.LimitsPlan
	Pos         Pos
}

// Base reports whether the pool runs the tenant's base contract unstaged: the pool a
// start naming nothing (no pool, contract, workspace or stage) may claim from.
func (p Pool) Base() bool { return p.Contract == "" && !p.Stage }

// poolBackends are the backends a pool may name.
var poolBackends = []string{"auto", "bwrap", "docker", "containerd", BackendKubernetes}

func decodePools(d *strictyaml.Decoder, n *yaml.Node) []Pool {
	var ps []Pool
	d.List(n, "pools", func(v *yaml.Node) { ps = append(ps, decodePool(d, v)) })
	if len(ps) > MaxPools {
		d.At(n, "pools: %d pools; at most %d", len(ps), MaxPools)
	}
	return ps
}

func decodePool(d *strictyaml.Decoder, n *yaml.Node) Pool {
	p := Pool{Pos: strictyaml.PosOf(n)}
	d.Mapping(n, "pool",
		strictyaml.Field{Name: "name", Decode: func(v *yaml.Node) { p.Name = decodeName(d, v, "pool name") }},
		strictyaml.Field{Name: "size", Decode: func(v *yaml.Node) {
			if i, ok := d.Int(v, "pool size", 1, MaxPoolSize); ok {
				p.Size = int(i)
			}
		}},
		strictyaml.Field{Name: "backend", Decode: func(v *yaml.Node) {
			p.Backend = d.Str(v, "pool backend")
			for _, b := range poolBackends {
				if b == p.Backend {
					return
				}
			}
			d.At(v, "pool backend: %q is not one of auto, bwrap, docker, containerd, kubernetes", p.Backend)
		}},
		strictyaml.Field{Name: "stage", Decode: func(v *yaml.Node) { p.Stage = d.Bool(v, "pool stage") }},
		strictyaml.Field{Name: "contract", Decode: func(v *yaml.Node) {
			p.Contract = absPath(d, v, "pool contract")
			p.ContractPos = strictyaml.PosOf(v)
		}},
	)
	if n.Kind == yaml.MappingNode {
		for _, k := range []string{"name", "size"} {
			if !hasKey(n, k) {
				d.At(n, "pool: missing %q", k)
			}
		}
	}
	return p
}

// checkPools checks a tenant's pools together: names once each, and the sizes' sum
// within [MaxPoolSize] and the tenant's sessions quota (a pool that could never fill
// would hold every session the tenant may have).
func checkPools(d *strictyaml.Decoder, t Tenant) {
	seen := map[string]Pos{}
	total := 0
	for _, p := range t.Pools {
		total += p.Size
		if p.Name == "" {
			continue
		}
		if q, dup := seen[p.Name]; dup {
			d.AtPos(p.Pos, "tenant %q: pool %q: the name is already used at %s", t.Name, p.Name, at(q))
		}
		seen[p.Name] = p.Pos
	}
	if total > MaxPoolSize {
		d.AtPos(t.Pos, "tenant %q: its pools hold %d warm sessions; at most %d", t.Name, total, MaxPoolSize)
	}
	if total > t.Quotas.Sessions {
		d.AtPos(t.Pos, "tenant %q: its pools hold %d warm sessions, more than its sessions quota (%d)", t.Name, total, t.Quotas.Sessions)
	}
}

// poolFile is a pool's contract: it is admitted against the base once, here, and then
// started unattended, so it is read only as the config is.
var poolFile = trustedFile{"pool contract", "changes what the tenant's warm sessions may do"}

// loadPools reads every pool's contract (the base's for a pool without one) and
// admits it against its tenant's base, as a start's contract is, in a workspace of
// its own made for the check: a pool wider than the base, or naming a host path
// outside its workspace, fails the load at its contract key. Every warm start admits
// it again in its real workspace.
func loadPools(c *Config) error {
	var errs []error
	for i := range c.Tenants {
		t := &c.Tenants[i]
		for j := range t.Pools {
			if err := loadPool(c, t, &t.Pools[j]); err != nil {
				errs = append(errs, err...)
			}
		}
	}
	return errors.Join(errs...)
}

func loadPool(c *Config, t *Tenant, p *Pool) []error {
	pos := p.Pos
	if p.Contract != "" {
		pos = p.ContractPos
	}
	at := func(format string, args ...any) error {
		return &Error{File: c.File, Pos: pos, Msg: fmt.Sprintf("tenant %q: pool %q: ", t.Name, p.Name) + fmt.Sprintf(format, args...)}
	}
	p.YAML = t.Base.YAML()
	if p.Contract != "" {
		if err := outsideTenants(p.Contract, poolFile.name, c); err != nil {
			return []error{at("%v", err)}
		}
		data, err := readTrusted(p.Contract, poolFile, admit.MaxContract)
		if err != nil {
			return []error{at("%v", err)}
		}
		p.YAML = bytes.Clone(data)
	}
	dir, err := os.MkdirTemp("", "cordon-pool-check-")
	if err != nil {
		return []error{at("checking the contract: %v", err)}
	}
	defer os.RemoveAll(dir)
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		return []error{at("checking the contract: %v", err)}
	}
	file := admit.RequestFile
	if p.Contract != "" {
		file = p.Contract
	}
	compiled, err := admit.CheckFile(t.Base, file, p.YAML, ws, dir)
	if err != nil {
		errs := []error{at("contract %s is not admitted by the tenant's base:", orBase(p.Contract))}
		var j interface{ Unwrap() []error }
		if errors.As(err, &j) {
			return append(errs, j.Unwrap()...)
		}
		return append(errs, err)
	}
	p.Limits = compiled.Plan.Limits
	return nil
}

func orBase(path string) string {
	if path == "" {
		return "(the base's)"
	}
	return path
}
