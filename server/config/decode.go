package config

import (
	"encoding/hex"
	"io/fs"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// Version is the config format version this cordon reads.
const Version = 1

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`) })

func decodeConfig(d *strictyaml.Decoder, n *yaml.Node, c *Config) {
	var version, listen, tenants *yaml.Node
	d.Mapping(n, "config",
		strictyaml.Field{Name: "version", Decode: func(v *yaml.Node) { version = v }},
		strictyaml.Field{Name: "listen", Decode: func(v *yaml.Node) { listen = v }},
		strictyaml.Field{Name: "tenants", Decode: func(v *yaml.Node) { tenants = v }},
	)
	if n.Kind != yaml.MappingNode {
		return
	}
	switch {
	case version == nil:
		d.At(n, "config: missing \"version: %d\"", Version)
	default:
		if v, ok := d.Int(version, "version", 0, math.MaxInt32); ok && v != Version {
			d.At(version, "version: %d is not supported; this cordon reads version %d", v, Version)
		}
	}
	if listen == nil {
		d.At(n, "config: missing \"listen\" (a unix socket, a TCP address, or both)")
	} else {
		decodeListen(d, listen, &c.Listen)
	}
	if tenants == nil {
		d.At(n, "config: missing \"tenants\"")
		return
	}
	d.List(tenants, "tenants", func(t *yaml.Node) {
		c.Tenants = append(c.Tenants, decodeTenant(d, t))
	})
	if len(c.Tenants) == 0 && (tenants.Kind == yaml.SequenceNode || strictyaml.IsNull(tenants)) {
		d.At(tenants, "tenants: empty; a server with no tenant has no one to serve")
	}
}

func decodeListen(d *strictyaml.Decoder, n *yaml.Node, l *Listen) {
	d.Mapping(n, "listen",
		strictyaml.Field{Name: "unix", Decode: func(v *yaml.Node) { l.Unix = decodeUnix(d, v) }},
		strictyaml.Field{Name: "tcp", Decode: func(v *yaml.Node) { l.TCP = decodeTCP(d, v) }},
		strictyaml.Field{Name: "metrics", Decode: func(v *yaml.Node) { l.Metrics = decodeMetrics(d, v) }},
		strictyaml.Field{Name: "timeouts", Decode: func(v *yaml.Node) { l.Timeouts = decodeTimeouts(d, v) }},
	)
	if (n.Kind == yaml.MappingNode || strictyaml.IsNull(n)) && l.Unix == nil && l.TCP == nil {
		d.At(n, "listen: want \"unix\", \"tcp\" or both")
	}
}

func decodeUnix(d *strictyaml.Decoder, n *yaml.Node) *Unix {
	u := &Unix{Pos: strictyaml.PosOf(n)}
	var mode *yaml.Node
	d.Mapping(n, "listen.unix",
		strictyaml.Field{Name: "path", Decode: func(v *yaml.Node) { u.Path = absPath(d, v, "listen.unix.path") }},
		strictyaml.Field{Name: "mode", Decode: func(v *yaml.Node) { mode = v }},
		strictyaml.Field{Name: "group", Decode: func(v *yaml.Node) { u.Group = d.Str(v, "listen.unix.group") }},
	)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if !hasKey(n, "path") {
		d.At(n, "listen.unix: missing \"path\"")
	}
	u.Mode = 0o600
	if u.Group != "" {
		u.Mode = 0o660
	}
	if mode != nil {
		u.Mode = decodeMode(d, mode)
	}
	return u
}

// decodeMode reads a socket mode written in octal, as chmod takes it: "0660" (quoted
// or not: YAML would read an unquoted 0660 as the number 432, so the text is used).
func decodeMode(d *strictyaml.Decoder, n *yaml.Node) fs.FileMode {
	s, ok := d.Scalar(n, "listen.unix.mode")
	if !ok {
		return 0o600
	}
	v, err := strconv.ParseUint(s, 8, 32)
	switch {
	case err != nil:
		d.At(n, "listen.unix.mode: want an octal mode such as \"0660\", got %q", s)
	case v&^0o777 != 0:
		d.At(n, "listen.unix.mode: %q has bits beyond 0777", s)
	case v&0o600 != 0o600:
		d.At(n, "listen.unix.mode: %q must let the server's own user read and write (0600)", s)
	default:
		return fs.FileMode(v)
	}
	return 0o600
}

func decodeTCP(d *strictyaml.Decoder, n *yaml.Node) *TCP {
	t := &TCP{Pos: strictyaml.PosOf(n)}
	d.Mapping(n, "listen.tcp",
		strictyaml.Field{Name: "address", Decode: func(v *yaml.Node) { t.Address = d.Str(v, "listen.tcp.address") }},
		strictyaml.Field{Name: "cert", Decode: func(v *yaml.Node) { t.Cert = absPath(d, v, "listen.tcp.cert") }},
		strictyaml.Field{Name: "key", Decode: func(v *yaml.Node) { t.Key = absPath(d, v, "listen.tcp.key") }},
		strictyaml.Field{Name: "client_ca", Decode: func(v *yaml.Node) { t.ClientCA = absPath(d, v, "listen.tcp.client_ca") }},
	)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if !hasKey(n, "address") {
		d.At(n, "listen.tcp: missing \"address\" (host:port)")
	}
	return t
}

// absPath is n as a clean absolute path: a relative one would depend on the directory
// the server happened to start in.
func absPath(d *strictyaml.Decoder, n *yaml.Node, what string) string {
	s := d.Str(n, what)
	if s == "" {
		return ""
	}
	if !filepath.IsAbs(s) {
		d.At(n, "%s: %q is not an absolute path", what, s)
		return ""
	}
	return filepath.Clean(s)
}

func decodeTenant(d *strictyaml.Decoder, n *yaml.Node) Tenant {
	t := Tenant{Pos: strictyaml.PosOf(n), Quotas: DefaultQuotas()}
	d.Mapping(n, "tenant",
		strictyaml.Field{Name: "name", Decode: func(v *yaml.Node) { t.Name = decodeName(d, v, "tenant name") }},
		strictyaml.Field{Name: "root", Decode: func(v *yaml.Node) { t.Root = absPath(d, v, "tenant root") }},
		strictyaml.Field{Name: "credentials", Decode: func(v *yaml.Node) {
			d.List(v, "credentials", func(c *yaml.Node) { t.Credentials = append(t.Credentials, decodeCredential(d, c)) })
		}},
		strictyaml.Field{Name: "quotas", Decode: func(v *yaml.Node) { decodeQuotas(d, v, &t.Quotas) }},
		strictyaml.Field{Name: "base_contract", Decode: func(v *yaml.Node) { decodeBase(d, v, &t) }},
		strictyaml.Field{Name: "pools", Decode: func(v *yaml.Node) { t.Pools = decodePools(d, v) }},
		strictyaml.Field{Name: "placement", Decode: func(v *yaml.Node) { t.Placement = decodePlacement(d, v) }},
		strictyaml.Field{Name: "pool", Decode: func(v *yaml.Node) {
			d.At(v, "pool: a tenant's warm pools are a list of named pools now: pools: [{name: default, size: N}]")
		}},
	)
	if n.Kind != yaml.MappingNode {
		return t
	}
	for _, f := range []struct{ key, val string }{{"name", t.Name}, {"root", t.Root}} {
		if f.val == "" && !hasKey(n, f.key) {
			d.At(n, "tenant: missing %q", f.key)
		}
	}
	return t
}

func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func decodeName(d *strictyaml.Decoder, n *yaml.Node, what string) string {
	s := d.Str(n, what)
	if s != "" && !nameRE().MatchString(s) {
		d.At(n, "%s: %q: want lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 63", what, s)
		return ""
	}
	return s
}

func decodeCredential(d *strictyaml.Decoder, n *yaml.Node) Credential {
	c := Credential{Pos: strictyaml.PosOf(n)}
	kinds := 0
	d.Mapping(n, "credential",
		strictyaml.Field{Name: "name", Decode: func(v *yaml.Node) { c.Name = decodeName(d, v, "credential name") }},
		strictyaml.Field{Name: "roles", Decode: func(v *yaml.Node) { c.Roles = decodeRoles(d, v) }},
		strictyaml.Field{Name: "token_sha256", Decode: func(v *yaml.Node) { kinds++; c.TokenSHA256 = decodeHash(d, v) }},
		strictyaml.Field{Name: "client_cert", Decode: func(v *yaml.Node) { kinds++; c.ClientCert = decodeCertID(d, v) }},
		strictyaml.Field{Name: "uid", Decode: func(v *yaml.Node) {
			kinds++
			if u, ok := d.Int(v, "credential uid", 0, math.MaxUint32-1); ok {
				uid := uint32(u)
				c.UID = &uid
			}
		}},
	)
	if n.Kind != yaml.MappingNode {
		return c
	}
	if !hasKey(n, "name") {
		d.At(n, "credential: missing \"name\"")
	}
	if kinds != 1 {
		d.At(n, "credential: want exactly one of token_sha256, client_cert and uid, got %d", kinds)
	}
	return c
}

func decodeHash(d *strictyaml.Decoder, n *yaml.Node) *[32]byte {
	s := d.Str(n, "token_sha256")
	if s == "" {
		return nil
	}
	var h [32]byte
	if len(s) != 64 || s != lowerHex(s) {
		d.At(n, "token_sha256: want 64 lowercase hex digits (the line `cordon serve token` prints)")
		return nil
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		d.At(n, "token_sha256: want 64 lowercase hex digits (the line `cordon serve token` prints)")
		return nil
	}
	return &h
}

func lowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func decodeCertID(d *strictyaml.Decoder, n *yaml.Node) *CertIdentity {
	var id CertIdentity
	set := 0
	d.Mapping(n, "client_cert",
		strictyaml.Field{Name: "common_name", Decode: func(v *yaml.Node) { set++; id.CommonName = d.Str(v, "client_cert.common_name") }},
		strictyaml.Field{Name: "san", Decode: func(v *yaml.Node) { set++; id.SAN = d.Str(v, "client_cert.san") }},
	)
	if n.Kind != yaml.MappingNode {
		if strictyaml.IsNull(n) {
			d.At(n, "client_cert: want common_name or san")
		}
		return nil
	}
	if set != 1 {
		d.At(n, "client_cert: want exactly one of common_name and san")
		return nil
	}
	if id.Value() == "" {
		return nil // reported by Str
	}
	return &id
}
