package contract

import (
	"math"
	"strconv"

	"gopkg.in/yaml.v3"
)

// contract decodes the top-level mapping. Each section has its own function below, so
// the schema reads top to bottom like the reference in docs/contract.md.
func (d *decoder) contract(n *yaml.Node, c *Contract) {
	if n.Kind != yaml.MappingNode {
		d.at(n, "contract: want a mapping with at least \"version: 1\", got %s", kindName(n))
		return
	}
	hasVersion := false
	d.mapping(n, "contract",
		field{"version", func(v *yaml.Node) {
			hasVersion = true
			c.VersionPos = pos(v)
			c.Version = int(d.integer(v, "version", 0, math.MaxInt32))
		}},
		field{"name", func(v *yaml.Node) { c.Name = d.str(v, "name") }},
		field{"workspace", func(v *yaml.Node) { c.Workspace = d.strPos(v, "workspace") }},
		field{"image", func(v *yaml.Node) { c.Image = d.str(v, "image") }},
		field{"pull", func(v *yaml.Node) { c.Pull = d.strPos(v, "pull") }},
		field{"filesystem", func(v *yaml.Node) { d.filesystem(v, &c.Filesystem) }},
		field{"network", func(v *yaml.Node) { d.network(v, &c.Network) }},
		field{"env", func(v *yaml.Node) { d.env(v, &c.Env) }},
		field{"credentials", func(v *yaml.Node) { d.credentials(v, c) }},
		field{"monitor", func(v *yaml.Node) { d.monitor(v, &c.Monitor) }},
		field{"commands", func(v *yaml.Node) { d.commands(v, &c.Commands) }},
		field{"limits", func(v *yaml.Node) { d.limits(v, &c.Limits) }},
		field{"gates", func(v *yaml.Node) { d.gates(v, c) }},
	)
	if !hasVersion {
		d.at(n, "contract: missing required key \"version\" (want \"version: %d\")", SchemaVersion)
	}
}

func (d *decoder) filesystem(n *yaml.Node, fs *Filesystem) {
	fs.set = map[string]bool{}
	list := func(name string, dst *[]Str) field {
		return field{name, func(v *yaml.Node) {
			fs.set[name] = true
			*dst = d.strList(v, "filesystem."+name)
		}}
	}
	d.mapping(n, "filesystem",
		list("writable", &fs.Writable),
		list("readable", &fs.Readable),
		list("deny_write", &fs.DenyWrite),
		list("deny_read", &fs.DenyRead),
		field{"git", func(v *yaml.Node) { fs.Git = d.strPos(v, "filesystem.git") }},
		field{"widen", func(v *yaml.Node) {
			d.list(v, "filesystem.widen", func(item *yaml.Node) {
				fs.Widen = append(fs.Widen, d.widening(item))
			})
		}},
	)
}

func (d *decoder) widening(n *yaml.Node) Widening {
	w := Widening{Pos: pos(n)}
	access := ""
	var accessNode *yaml.Node
	d.mapping(n, "filesystem.widen entry",
		field{"path", func(v *yaml.Node) { w.Path = d.strPos(v, "widen.path") }},
		field{"access", func(v *yaml.Node) { access, accessNode = d.str(v, "widen.access"), v }},
		field{"why", func(v *yaml.Node) { w.Why = d.str(v, "widen.why") }},
	)
	switch access {
	case "", "read":
		w.Access = ReadOnly
	case "write":
		w.Access = ReadWrite
	default:
		d.at(accessNode, "widen.access: want read or write, got %q", access)
	}
	return w
}

func (d *decoder) network(n *yaml.Node, nw *Network) {
	d.mapping(n, "network",
		field{"allow", func(v *yaml.Node) {
			nw.Allow = []NetRule{}
			d.list(v, "network.allow", func(item *yaml.Node) {
				nw.Allow = append(nw.Allow, d.netRule(item))
			})
		}},
	)
}

func (d *decoder) netRule(n *yaml.Node) NetRule {
	r := NetRule{Pos: pos(n)}
	d.mapping(n, "network.allow entry",
		field{"host", func(v *yaml.Node) { r.Host = d.str(v, "allow.host") }},
		field{"cidr", func(v *yaml.Node) { r.CIDR = d.str(v, "allow.cidr") }},
		field{"ports", func(v *yaml.Node) {
			r.Ports = []uint16{}
			d.list(v, "allow.ports", func(p *yaml.Node) {
				if port := d.integer(p, "allow.ports entry", 1, 65535); port != 0 {
					r.Ports = append(r.Ports, uint16(port))
				}
			})
		}},
		field{"why", func(v *yaml.Node) { r.Why = d.str(v, "allow.why") }},
	)
	return r
}

func (d *decoder) env(n *yaml.Node, e *Env) {
	d.mapping(n, "env",
		field{"pass", func(v *yaml.Node) { e.Pass = d.strList(v, "env.pass") }},
		field{"set", func(v *yaml.Node) {
			if isNull(v) {
				return
			}
			if v.Kind != yaml.MappingNode {
				d.at(v, "env.set: want a mapping of NAME: value, got %s", kindName(v))
				return
			}
			seen := map[string]int{}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := v.Content[i], v.Content[i+1]
				if line, dup := seen[k.Value]; dup {
					d.at(k, "env.set: duplicate key %q (first at line %d)", k.Value, line)
					continue
				}
				seen[k.Value] = k.Line
				s, _ := d.scalar(val, "env.set."+k.Value)
				e.Set = append(e.Set, EnvVar{Name: k.Value, Value: s, Pos: pos(k)})
			}
		}},
	)
}

func (d *decoder) credentials(n *yaml.Node, c *Contract) {
	c.Credentials = []Credential{}
	d.list(n, "credentials", func(item *yaml.Node) {
		cr := Credential{Pos: pos(item)}
		d.mapping(item, "credentials entry",
			field{"name", func(v *yaml.Node) { cr.Name = d.str(v, "credentials.name") }},
			field{"provider", func(v *yaml.Node) { cr.Provider = d.str(v, "credentials.provider") }},
			field{"ttl", func(v *yaml.Node) { cr.TTL = d.duration(v, "credentials.ttl") }},
			field{"scope", func(v *yaml.Node) {
				if v.Kind != yaml.MappingNode {
					d.at(v, "credentials.scope: want a mapping, got %s", kindName(v))
					return
				}
				if err := v.Decode(&cr.Scope); err != nil {
					d.at(v, "credentials.scope: %v", err)
				}
			}},
			field{"deliver", func(v *yaml.Node) { cr.Deliver = Deliver(d.str(v, "credentials.deliver")) }},
			field{"hosts", func(v *yaml.Node) {
				for _, h := range d.strList(v, "credentials.hosts") {
					cr.Hosts = append(cr.Hosts, h.Value)
				}
			}},
			field{"why", func(v *yaml.Node) { cr.Why = d.str(v, "credentials.why") }},
		)
		c.Credentials = append(c.Credentials, cr)
	})
}

func (d *decoder) monitor(n *yaml.Node, m *Monitor) {
	d.mapping(n, "monitor",
		field{"mode", func(v *yaml.Node) { m.Mode = d.strPos(v, "monitor.mode") }},
		field{"on_violation", func(v *yaml.Node) { m.OnViolation = d.strPos(v, "monitor.on_violation") }},
		field{"exec", func(v *yaml.Node) { m.Exec = d.strList(v, "monitor.exec") }},
	)
}

func (d *decoder) commands(n *yaml.Node, c *Commands) {
	d.mapping(n, "commands",
		field{"timeout", func(v *yaml.Node) {
			c.TimeoutPos = pos(v)
			c.Timeout = d.duration(v, "commands.timeout")
		}},
		field{"deny", func(v *yaml.Node) { c.Deny = d.strList(v, "commands.deny") }},
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
	l.Pos = pos(n)
	d.mapping(n, "limits",
		field{"memory", func(v *yaml.Node) {
			if !d.unlimited(v, &l.Memory) {
				l.Memory = d.size(v, "limits.memory")
			}
		}},
		field{"pids", func(v *yaml.Node) {
			if !d.unlimited(v, &l.Pids) {
				l.Pids = d.integer(v, "limits.pids", 1, 1<<22)
			}
		}},
		field{"cpu", func(v *yaml.Node) {
			s, ok := d.scalar(v, "limits.cpu")
			if !ok {
				return
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || (v.Tag != "!!int" && v.Tag != "!!float") || f <= 0 || f > 1024 {
				d.at(v, "limits.cpu: want a positive number of CPUs (e.g. 2 or 0.5), got %s", kindName(v))
				return
			}
			l.CPU = f
		}},
		field{"diff", func(v *yaml.Node) { d.diffLimits(v, &l.Diff) }},
	)
}

func (d *decoder) diffLimits(n *yaml.Node, l *DiffLimits) {
	d.mapping(n, "limits.diff",
		field{"entries", func(v *yaml.Node) { l.Entries = d.integer(v, "limits.diff.entries", 100, 100_000_000) }},
		field{"hash_file", func(v *yaml.Node) { l.HashFile = d.size(v, "limits.diff.hash_file") }},
		field{"hash_total", func(v *yaml.Node) { l.HashTotal = d.size(v, "limits.diff.hash_total") }},
		field{"patch", func(v *yaml.Node) { l.Patch = d.size(v, "limits.diff.patch") }},
		field{"patch_run", func(v *yaml.Node) { l.PatchRun = d.size(v, "limits.diff.patch_run") }},
		field{"time", func(v *yaml.Node) { l.Time = d.duration(v, "limits.diff.time") }},
	)
}
