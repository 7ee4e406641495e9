// Package config is `cordon serve`'s configuration: where the server listens and which
// tenants it serves, with the credentials that act for each. It is pure: [Parse]
// decodes and validates bytes, [Load] reads one bounded file; nothing is resolved
// against the host (a group name, a certificate file) until the server starts.
//
// Decoding is strict (unknown keys refused) and every problem is reported at once,
// each as FILE:LINE:COL: message (docs/serve.md).
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/strictyaml"
	"github.com/cordonhq/cordon/server/admit"
)

// Pos is a position in the config file.
type Pos = strictyaml.Pos

// Error is one problem in the config file; [Parse] returns them joined.
type Error = strictyaml.Error

// MaxSize is the largest config file [Load] reads.
const MaxSize = 1 << 20

// Config is one server's configuration.
type Config struct {
	File    string
	Listen  Listen
	Tenants []Tenant
}

// Listen says where the server accepts connections: a unix socket, TCP with TLS, or
// both. At least one is set. Metrics is apart: it serves no API.
type Listen struct {
	Unix     *Unix
	TCP      *TCP
	Metrics  *Metrics // GET /metrics, on its own listener; nil serves none
	Timeouts Timeouts // of requests and answers, on every listener
}

// Unix is the local socket. Its callers are known by their uid (SO_PEERCRED) or by a
// bearer token.
type Unix struct {
	Path  string      // absolute; its directory must be the server user's own
	Mode  fs.FileMode // permission bits of the socket; default 0600, or 0660 with a group
	Group string      // a group name or number the socket is given to; "" keeps the server's
	Pos   Pos
}

// TCP is the network listener; TLS is not optional.
type TCP struct {
	Address  string // host:port
	Cert     string // the server's certificate chain (PEM file)
	Key      string // its private key (PEM file)
	ClientCA string // CA certificates (PEM file) client certificates are verified against; "" asks for none
	Pos      Pos
}

// Tenant is one isolation domain: its own root and the credentials that act for it.
type Tenant struct {
	Name        string
	Root        string // the tenant's run, audit and workspace root: absolute
	Credentials []Credential
	Quotas      Quotas // what it may hold at once; defaults when the config sets none
	Pools       []Pool // its warm pools, each of one contract; none: every start is cold
	Pos         Pos
	// BaseContract is the path of the tenant's base contract (base_contract), "" for
	// none: the most a contract of the tenant may allow. Base is that contract, read
	// and compiled by [Load] (the built-in default when BaseContract is ""); nil after
	// [Parse] alone, which [admit.Check] refuses.
	BaseContract    string
	BaseContractPos Pos
	Base            *admit.Base
	// Placement is where its sessions run: this host, or a Kubernetes cluster.
	Placement Placement
}

// Credential is one way of proving to be a tenant, with the roles it carries.
// Exactly one of TokenSHA256, ClientCert and UID is set.
type Credential struct {
	Name        string
	Roles       Roles
	TokenSHA256 *[32]byte     // SHA-256 of a bearer token (the token itself is never stored)
	ClientCert  *CertIdentity // a client certificate verified against listen.tcp.client_ca
	UID         *uint32       // a local user on the unix socket
	Pos         Pos
}

// CertIdentity names a client certificate: by its subject's common name or by one of
// its subject alternative names (DNS name, email address or URI). Exactly one is set.
type CertIdentity struct {
	CommonName string
	SAN        string
}

// Value is the name the identity matches, whichever kind it is.
func (c CertIdentity) Value() string { return c.CommonName + c.SAN }

// Key is the name with its kind ("cn:NAME" or "san:NAME"): a common name matches only
// a certificate's subject common name, a SAN only its subject alternative names. Many
// CAs let the requester choose the common name freely and verify only the SANs (or the
// other way round), so a name matched in the other field would be a name nobody
// vouched for.
func (c CertIdentity) Key() string {
	if c.SAN != "" {
		return "san:" + c.SAN
	}
	return "cn:" + c.CommonName
}

// Load reads the config file at path (at most [MaxSize] bytes) and parses it.
// Whoever can write the file, or replace it, can make themselves any tenant's
// credential, so it is trusted only as [paths.CheckDir] and [paths.ReadRecordMax] trust
// a record: a regular file, no symbolic link, owned by root or by this process's user
// and writable by no one else, in a directory chain no one else can change; and
// nowhere in a tenant's root, where a sandbox may write root's files.
func Load(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errdefs.Invalidf("reading the config: %w", err)
	}
	data, err := readTrusted(abs, configFile, MaxSize)
	if err != nil {
		return nil, err
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if err := outsideTenants(abs, configFile.name, c); err != nil {
		return nil, err
	}
	if err := loadBases(c); err != nil {
		return nil, err
	}
	if err := loadPools(c); err != nil {
		return nil, err
	}
	if err := loadPlacements(c); err != nil {
		return nil, err
	}
	return c, nil
}

// trustedFile names a file the server reads only when it is trusted, for errors.
type trustedFile struct {
	name string // "the config"
	why  string // what whoever can change it can do
}

var configFile = trustedFile{"the config", "can make themselves any tenant's credential"}

// readTrusted reads the file f at abs, at most max bytes, when its directory chain and
// the file are trusted by this process's user or, failing that, by root
// ([paths.ReadTrusted]).
func readTrusted(abs string, f trustedFile, max int64) ([]byte, error) {
	data, err := paths.ReadTrusted(abs, max)
	switch {
	case errors.Is(err, paths.ErrUnsafe):
		return nil, fmt.Errorf("%s %s is not safe to read (whoever can change it %s): %w", f.name, abs, f.why, err)
	case err != nil:
		return nil, errdefs.Invalidf("reading %s: %w", f.name, err)
	}
	return data, nil
}

// outsideTenants refuses a file the server trusts (what names it) inside a tenant's
// root, by its path or by the path its directories' links lead to.
func outsideTenants(abs, what string, c *Config) error {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return errdefs.Invalidf("reading %s: %w", what, err)
	}
	for _, t := range c.Tenants {
		roots := []string{t.Root}
		if r, err := filepath.EvalSymlinks(t.Root); err == nil {
			roots = append(roots, r)
		}
		for _, root := range roots {
			if within(abs, root) || within(real, root) {
				return errdefs.Unavailablef("%w: %s %s is inside tenant %q's root %s, where a sandbox may write files as root", paths.ErrUnsafe, what, abs, t.Name, t.Root)
			}
		}
	}
	return nil
}

// Parse decodes and validates a config from data; file names it in errors. Every
// problem is returned, joined, each an [*Error].
func Parse(file string, data []byte) (*Config, error) {
	top, d, err := strictyaml.Parse(file, data, strictyaml.Doc{
		Empty:  `empty file: want at least "version: 1", "listen" and "tenants"`,
		Second: "one YAML document is allowed; found a second one",
	})
	if err != nil {
		return nil, err
	}
	c := &Config{File: file}
	decodeConfig(d, top, c)
	validate(d, c) // over what decoded: a value that did not is already reported, and skipped

	if err := d.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// A tenant's state lives under its root, each part in its own directory, made by the
// server (root's, 0700) before it serves: sandboxes write only inside Workspaces.
const (
	runDir        = "run"        // the tenant's run root (CORDON_RUN_ROOT): sessions, gates, run dirs
	auditDir      = "audit"      // the tenant's audit root
	workspacesDir = "workspaces" // one directory per named workspace
)

// RunRoot is the tenant's run root: its sessions, gate sockets and run directories.
func (t Tenant) RunRoot() string { return filepath.Join(t.Root, runDir) }

// AuditRoot is the tenant's audit root.
func (t Tenant) AuditRoot() string { return filepath.Join(t.Root, auditDir) }

// Workspaces is the directory holding the tenant's named workspaces; no contract of
// the tenant may name a host path outside it.
func (t Tenant) Workspaces() string { return filepath.Join(t.Root, workspacesDir) }
