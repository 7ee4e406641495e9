package config

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/strictyaml"
	"github.com/cordonhq/cordon/server/disk"
)

// validate checks what relates values to one another: uniqueness, nesting, TLS and the
// roles. Each check reports at the later of two conflicting places, naming the first.
func validate(d *strictyaml.Decoder, c *Config) {
	checkTLS(d, c)
	checkTenants(d, c)
	checkCredentials(d, c)
	for _, t := range c.Tenants {
		checkPools(d, t)
	}
}

func at(p Pos) string { return fmt.Sprintf("line %d", p.Line) }

func checkTLS(d *strictyaml.Decoder, c *Config) {
	t := c.Listen.TCP
	if t != nil && (t.Cert == "" || t.Key == "") {
		d.AtPos(t.Pos, "listen.tcp: a TCP listener needs TLS: set \"cert\" and \"key\" (tokens must never cross a network in clear)")
	}
	for _, tn := range c.Tenants {
		for _, cr := range tn.Credentials {
			if cr.ClientCert == nil {
				continue
			}
			switch {
			case t == nil:
				d.AtPos(cr.Pos, "credential %q: a client certificate needs a TCP listener (listen.tcp)", cr.Name)
			case t.ClientCA == "":
				d.AtPos(cr.Pos, "credential %q: a client certificate is verified against listen.tcp.client_ca, which is not set", cr.Name)
			}
		}
	}
}

func checkTenants(d *strictyaml.Decoder, c *Config) {
	names := map[string]Pos{}
	for i, t := range c.Tenants {
		if t.Name != "" {
			if p, dup := names[t.Name]; dup {
				d.AtPos(t.Pos, "tenant %q: the name is already used at %s", t.Name, at(p))
			} else {
				names[t.Name] = t.Pos
			}
		}
		for _, o := range c.Tenants[:i] {
			if t.Root == "" || o.Root == "" {
				continue
			}
			if within(t.Root, o.Root) || within(o.Root, t.Root) {
				d.AtPos(t.Pos, "tenant %q: root %s overlaps tenant %q's root %s (%s): a tenant's root must not be inside another's", t.Name, t.Root, o.Name, o.Root, at(o.Pos))
				continue
			}
			for _, p := range [][2]Tenant{{t, o}, {o, t}} {
				if img := disk.ImagePath(p[0].Root); p[0].Quotas.Disk > 0 && (within(img, p[1].Root) || within(p[1].Root, img)) {
					d.AtPos(t.Pos, "tenant %q: root %s and tenant %q's disk image %s overlap: a tenant's disk must be out of every tenant's reach", p[1].Name, p[1].Root, p[0].Name, img)
				}
			}
		}
		if c.Listen.Unix != nil && t.Root != "" && within(c.Listen.Unix.Path, t.Root) {
			d.AtPos(t.Pos, "tenant %q: root %s holds the server's socket %s", t.Name, t.Root, c.Listen.Unix.Path)
		}
	}
}

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func checkCredentials(d *strictyaml.Decoder, c *Config) {
	tokens, certs, uids := map[[32]byte]Pos{}, map[string]Pos{}, map[uint32]Pos{}
	for _, t := range c.Tenants {
		names := map[string]Pos{}
		for _, cr := range t.Credentials {
			if cr.Name != "" {
				if p, dup := names[cr.Name]; dup {
					d.AtPos(cr.Pos, "credential %q: the name is already used in tenant %q at %s", cr.Name, t.Name, at(p))
				} else {
					names[cr.Name] = cr.Pos
				}
			}
			checkRoles(d, cr)
			switch {
			case cr.TokenSHA256 != nil:
				once(d, tokens, *cr.TokenSHA256, cr, "token_sha256 "+hex.EncodeToString(cr.TokenSHA256[:4])+"…")
			case cr.ClientCert != nil:
				once(d, certs, cr.ClientCert.Value(), cr, fmt.Sprintf("client certificate name %q", cr.ClientCert.Value()))
			case cr.UID != nil:
				once(d, uids, *cr.UID, cr, fmt.Sprintf("uid %d", *cr.UID))
			}
		}
	}
}

// once refuses an identity that maps to two credentials: the server could not tell
// which one, hence which tenant, a caller is. A certificate name counts once whether it
// is matched as a common name or as a SAN: one certificate can carry both.
func once[K comparable](d *strictyaml.Decoder, seen map[K]Pos, k K, cr Credential, what string) {
	if p, dup := seen[k]; dup {
		d.AtPos(cr.Pos, "credential %q: %s is already mapped at %s; one identity maps to one credential", cr.Name, what, at(p))
		return
	}
	seen[k] = cr.Pos
}

func checkRoles(d *strictyaml.Decoder, cr Credential) {
	switch {
	case cr.Roles == 0:
		d.AtPos(cr.Pos, "credential %q: no roles; want one or more of agent, approver, auditor", cr.Name)
	case cr.Roles.Has(RoleAgent | RoleApprover):
		d.AtPos(cr.Pos, "credential %q: both agent and approver; the credential an agent runs with must never approve its own gate, so give approval to a separate credential", cr.Name)
	}
}
