package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// Roles is the set of things a credential may do within its tenant. The zero value
// may do nothing.
type Roles uint8

// The roles a credential can carry.
const (
	RoleAgent    Roles = 1 << iota // start, exec in and stop sessions
	RoleApprover                   // approve or deny gates
	RoleAuditor                    // read the audit logs
)

var roleNames = []struct {
	r    Roles
	name string
}{{RoleAgent, "agent"}, {RoleApprover, "approver"}, {RoleAuditor, "auditor"}}

// Has reports whether rs holds every role of r.
func (rs Roles) Has(r Roles) bool { return rs&r == r && r != 0 }

// Names is rs as role names, in a fixed order.
func (rs Roles) Names() []string {
	out := []string{}
	for _, rn := range roleNames {
		if rs&rn.r != 0 {
			out = append(out, rn.name)
		}
	}
	return out
}

func (rs Roles) String() string { return strings.Join(rs.Names(), ",") }

func decodeRoles(d *strictyaml.Decoder, n *yaml.Node) Roles {
	var rs Roles
	d.List(n, "roles", func(item *yaml.Node) {
		s := d.Str(item, "role")
		if s == "" {
			return
		}
		for _, rn := range roleNames {
			if rn.name == s {
				if rs&rn.r != 0 {
					d.At(item, "roles: %q is listed twice", s)
				}
				rs |= rn.r
				return
			}
		}
		d.At(item, "roles: unknown role %q (known: agent, approver, auditor)", s)
	})
	return rs
}

// ParseRole is the role named name ("" for none: any credential).
func ParseRole(name string) (Roles, error) {
	if name == "" {
		return 0, nil
	}
	for _, rn := range roleNames {
		if rn.name == name {
			return rn.r, nil
		}
	}
	return 0, fmt.Errorf("unknown role %q", name)
}
