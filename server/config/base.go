package config

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
	"github.com/cordonhq/cordon/server/admit"
)

// decodeBase reads a tenant's base_contract: an absolute path, which [Load] reads and
// compiles.
func decodeBase(d *strictyaml.Decoder, n *yaml.Node, t *Tenant) {
	t.BaseContract = absPath(d, n, "base_contract")
	t.BaseContractPos = strictyaml.PosOf(n)
}

// baseFile is a base contract: whoever can change it widens every session of its
// tenant, so it is read only as the config is.
var baseFile = trustedFile{"base_contract", "widens what every sandbox of the tenant may do"}

// loadBases reads and compiles every tenant's base contract; a tenant without one gets
// the built-in default. Every problem is returned, joined, each an [*Error]: at the
// base_contract key in the config, then the base's own at FILE:LINE:COL in it.
func loadBases(c *Config) error {
	var errs []error
	for i := range c.Tenants {
		t := &c.Tenants[i]
		if t.BaseContract == "" {
			t.Base = admit.Default()
			continue
		}
		b, err := loadBase(c, t)
		if err != nil {
			errs = append(errs, err...)
			continue
		}
		t.Base = b
	}
	return errors.Join(errs...)
}

func loadBase(c *Config, t *Tenant) (*admit.Base, []error) {
	at := func(format string, args ...any) error {
		return &Error{File: c.File, Pos: t.BaseContractPos, Msg: fmt.Sprintf("tenant %q: ", t.Name) + fmt.Sprintf(format, args...)}
	}
	if err := outsideTenants(t.BaseContract, baseFile.name, c); err != nil {
		return nil, []error{at("%v", err)}
	}
	data, err := readTrusted(t.BaseContract, baseFile, admit.MaxContract)
	if err != nil {
		return nil, []error{at("%v", err)}
	}
	b, err := admit.ParseBase(t.BaseContract, data)
	if err != nil {
		errs := []error{at("base_contract %s does not compile:", t.BaseContract)}
		var j interface{ Unwrap() []error }
		if errors.As(err, &j) {
			return nil, append(errs, j.Unwrap()...)
		}
		return nil, append(errs, err)
	}
	return b, nil
}
