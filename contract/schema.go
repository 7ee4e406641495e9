package contract

import (
	"math"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// contract decodes the top-level mapping. Each section has its own function below, so
// the schema reads top to bottom like the reference in docs/contract.md.
func (d *decoder) contract(n *yaml.Node, c *Contract) {
	if n.Kind != yaml.MappingNode {
		d.At(n, "contract: want a mapping with at least \"version: 1\", got %s", strictyaml.KindName(n))
		return
	}
	hasVersion := false
	d.Mapping(n, "contract",
		strictyaml.Field{Name: "version", Decode: func(v *yaml.Node) {
			hasVersion = true
			c.VersionPos = strictyaml.PosOf(v)
			version, _ := d.Int(v, "version", 0, math.MaxInt32)
			c.Version = int(version)
		}},
		strictyaml.Field{Name: "name", Decode: func(v *yaml.Node) { c.Name = d.Str(v, "name") }},
		strictyaml.Field{Name: "workspace", Decode: func(v *yaml.Node) { c.Workspace = d.strPos(v, "workspace") }},
		strictyaml.Field{Name: "image", Decode: func(v *yaml.Node) { c.Image = d.Str(v, "image") }},
		strictyaml.Field{Name: "pull", Decode: func(v *yaml.Node) { c.Pull = d.strPos(v, "pull") }},
		strictyaml.Field{Name: "filesystem", Decode: func(v *yaml.Node) { d.filesystem(v, &c.Filesystem) }},
		strictyaml.Field{Name: "network", Decode: func(v *yaml.Node) { d.network(v, &c.Network) }},
		strictyaml.Field{Name: "env", Decode: func(v *yaml.Node) { d.env(v, &c.Env) }},
		strictyaml.Field{Name: "credentials", Decode: func(v *yaml.Node) { d.credentials(v, c) }},
		strictyaml.Field{Name: "monitor", Decode: func(v *yaml.Node) { d.monitor(v, &c.Monitor) }},
		strictyaml.Field{Name: "commands", Decode: func(v *yaml.Node) { d.commands(v, &c.Commands) }},
		strictyaml.Field{Name: "limits", Decode: func(v *yaml.Node) { d.limits(v, &c.Limits) }},
		strictyaml.Field{Name: "gates", Decode: func(v *yaml.Node) { d.gates(v, c) }},
	)
	if !hasVersion {
		d.At(n, "contract: missing required key \"version\" (want \"version: %d\")", SchemaVersion)
	}
}

func (d *decoder) filesystem(n *yaml.Node, fs *Filesystem) {
	fs.set = map[string]bool{}
	list := func(name string, dst *[]Str) strictyaml.Field {
		return strictyaml.Field{Name: name, Decode: func(v *yaml.Node) {
			fs.set[name] = true
			*dst = d.strList(v, "filesystem."+name)
		}}
	}
	d.Mapping(n, "filesystem",
		list("writable", &fs.Writable),
		list("readable", &fs.Readable),
		list("deny_write", &fs.DenyWrite),
		list("deny_read", &fs.DenyRead),
		strictyaml.Field{Name: "git", Decode: func(v *yaml.Node) { fs.Git = d.strPos(v, "filesystem.git") }},
		strictyaml.Field{Name: "widen", Decode: func(v *yaml.Node) {
			d.List(v, "filesystem.widen", func(item *yaml.Node) {
				fs.Widen = append(fs.Widen, d.widening(item))
			})
		}},
	)
}

func (d *decoder) widening(n *yaml.Node) Widening {
	w := Widening{Pos: strictyaml.PosOf(n)}
	access := ""
	var accessNode *yaml.Node
	d.Mapping(n, "filesystem.widen entry",
		strictyaml.Field{Name: "path", Decode: func(v *yaml.Node) { w.Path = d.strPos(v, "widen.path") }},
		strictyaml.Field{Name: "access", Decode: func(v *yaml.Node) { access, accessNode = d.Str(v, "widen.access"), v }},
		strictyaml.Field{Name: "why", Decode: func(v *yaml.Node) { w.Why = d.Str(v, "widen.why") }},
	)
	switch access {
	case "", "read":
		w.Access = ReadOnly
	case "write":
		w.Access = ReadWrite
	default:
		d.At(accessNode, "widen.access: want read or write, got %q", access)
	}
	return w
}

func (d *decoder) network(n *yaml.Node, nw *Network) {
	d.Mapping(n, "network",
		strictyaml.Field{Name: "allow", Decode: func(v *yaml.Node) {
			nw.Allow = []NetRule{}
			d.List(v, "network.allow", func(item *yaml.Node) {
				nw.Allow = append(nw.Allow, d.netRule(item))
			})
		}},
	)
}

func (d *decoder) netRule(n *yaml.Node) NetRule {
	r := NetRule{Pos: strictyaml.PosOf(n)}
	d.Mapping(n, "network.allow entry",
		strictyaml.Field{Name: "host", Decode: func(v *yaml.Node) { r.Host = d.Str(v, "allow.host") }},
		strictyaml.Field{Name: "cidr", Decode: func(v *yaml.Node) { r.CIDR = d.Str(v, "allow.cidr") }},
		strictyaml.Field{Name: "ports", Decode: func(v *yaml.Node) {
			r.Ports = []uint16{}
			d.List(v, "allow.ports", func(p *yaml.Node) {
				if port, ok := d.Int(p, "allow.ports entry", 1, 65535); ok {
					r.Ports = append(r.Ports, uint16(port))
				}
			})
		}},
		strictyaml.Field{Name: "why", Decode: func(v *yaml.Node) { r.Why = d.Str(v, "allow.why") }},
	)
	return r
}

func (d *decoder) env(n *yaml.Node, e *Env) {
	d.Mapping(n, "env",
		strictyaml.Field{Name: "pass", Decode: func(v *yaml.Node) { e.Pass = d.strList(v, "env.pass") }},
		strictyaml.Field{Name: "set", Decode: func(v *yaml.Node) {
			if strictyaml.IsNull(v) {
				return
			}
			if v.Kind != yaml.MappingNode {
				d.At(v, "env.set: want a mapping of NAME: value, got %s", strictyaml.KindName(v))
				return
			}
			seen := map[string]int{}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := v.Content[i], v.Content[i+1]
				if line, dup := seen[k.Value]; dup {
					d.At(k, "env.set: duplicate key %q (first at line %d)", k.Value, line)
					continue
				}
				seen[k.Value] = k.Line
				s, _ := d.Scalar(val, "env.set."+k.Value)
				e.Set = append(e.Set, EnvVar{Name: k.Value, Value: s, Pos: strictyaml.PosOf(k)})
			}
		}},
	)
}

func (d *decoder) credentials(n *yaml.Node, c *Contract) {
	c.Credentials = []Credential{}
	d.List(n, "credentials", func(item *yaml.Node) {
		cr := Credential{Pos: strictyaml.PosOf(item)}
		d.Mapping(item, "credentials entry",
			strictyaml.Field{Name: "name", Decode: func(v *yaml.Node) { cr.Name = d.Str(v, "credentials.name") }},
			strictyaml.Field{Name: "provider", Decode: func(v *yaml.Node) { cr.Provider = d.Str(v, "credentials.provider") }},
			strictyaml.Field{Name: "ttl", Decode: func(v *yaml.Node) { cr.TTL = d.duration(v, "credentials.ttl") }},
			strictyaml.Field{Name: "scope", Decode: func(v *yaml.Node) {
				if v.Kind != yaml.MappingNode {
					d.At(v, "credentials.scope: want a mapping, got %s", strictyaml.KindName(v))
					return
				}
				if err := v.Decode(&cr.Scope); err != nil {
					d.At(v, "credentials.scope: %v", err)
				}
			}},
			strictyaml.Field{Name: "deliver", Decode: func(v *yaml.Node) { cr.Deliver = Deliver(d.Str(v, "credentials.deliver")) }},
			strictyaml.Field{Name: "hosts", Decode: func(v *yaml.Node) {
				for _, h := range d.strList(v, "credentials.hosts") {
					cr.Hosts = append(cr.Hosts, h.Value)
				}
			}},
			strictyaml.Field{Name: "why", Decode: func(v *yaml.Node) { cr.Why = d.Str(v, "credentials.why") }},
		)
		c.Credentials = append(c.Credentials, cr)
	})
}

func (d *decoder) monitor(n *yaml.Node, m *Monitor) {
	d.Mapping(n, "monitor",
		strictyaml.Field{Name: "mode", Decode: func(v *yaml.Node) { m.Mode = d.strPos(v, "monitor.mode") }},
		strictyaml.Field{Name: "on_violation", Decode: func(v *yaml.Node) { m.OnViolation = d.strPos(v, "monitor.on_violation") }},
		strictyaml.Field{Name: "exec", Decode: func(v *yaml.Node) { m.Exec = d.strList(v, "monitor.exec") }},
	)
}

func (d *decoder) commands(n *yaml.Node, c *Commands) {
	d.Mapping(n, "commands",
		strictyaml.Field{Name: "timeout", Decode: func(v *yaml.Node) {
			c.TimeoutPos = strictyaml.PosOf(v)
			c.Timeout = d.duration(v, "commands.timeout")
		}},
		strictyaml.Field{Name: "deny", Decode: func(v *yaml.Node) { c.Deny = d.strList(v, "commands.deny") }},
	)
}

// unlimited sets *v to [Unlimited] when n is the word unlimited.
func (d *decoder) unlimited(n *yaml.Node, v *int64) bool {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == "unlimited" {
		*v = Unlimited
		return true
	}
	return false
}

func (d *decoder) limits(n *yaml.Node, l *Limits) {
	l.Pos = strictyaml.PosOf(n)
	d.Mapping(n, "limits",
		strictyaml.Field{Name: "memory", Decode: func(v *yaml.Node) {
			if !d.unlimited(v, &l.Memory) {
				l.Memory = d.size(v, "limits.memory")
			}
		}},
		strictyaml.Field{Name: "pids", Decode: func(v *yaml.Node) {
			if !d.unlimited(v, &l.Pids) {
				l.Pids, _ = d.Int(v, "limits.pids", 1, 1<<22)
			}
		}},
		strictyaml.Field{Name: "cpu", Decode: func(v *yaml.Node) {
			s, ok := d.Scalar(v, "limits.cpu")
			if !ok {
				return
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || (v.Tag != "!!int" && v.Tag != "!!float") || f <= 0 || f > 1024 {
				d.At(v, "limits.cpu: want a positive number of CPUs (e.g. 2 or 0.5), got %s", strictyaml.KindName(v))
				return
			}
			l.CPU = f
		}},
		strictyaml.Field{Name: "diff", Decode: func(v *yaml.Node) { d.diffLimits(v, &l.Diff) }},
	)
}

func (d *decoder) diffLimits(n *yaml.Node, l *DiffLimits) {
	d.Mapping(n, "limits.diff",
		strictyaml.Field{Name: "entries", Decode: func(v *yaml.Node) { l.Entries, _ = d.Int(v, "limits.diff.entries", 100, 100_000_000) }},
		strictyaml.Field{Name: "hash_file", Decode: func(v *yaml.Node) { l.HashFile = d.size(v, "limits.diff.hash_file") }},
		strictyaml.Field{Name: "hash_total", Decode: func(v *yaml.Node) { l.HashTotal = d.size(v, "limits.diff.hash_total") }},
		strictyaml.Field{Name: "patch", Decode: func(v *yaml.Node) { l.Patch = d.size(v, "limits.diff.patch") }},
		strictyaml.Field{Name: "patch_run", Decode: func(v *yaml.Node) { l.PatchRun = d.size(v, "limits.diff.patch_run") }},
		strictyaml.Field{Name: "time", Decode: func(v *yaml.Node) { l.Time = d.duration(v, "limits.diff.time") }},
	)
}
