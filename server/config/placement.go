package config

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// Placement is where a tenant's sessions run: on this host (the zero value) or, with
// Kubernetes set, as Pods on a cluster.
type Placement struct {
	Kubernetes *KubernetesPlacement
}

// KubernetesPlacement places a tenant's sessions on a cluster (placement:
// kubernetes:). Config is the placement's config file (the tenant's namespace, the
// images, the uid: the format `cordon explain --placement kubernetes
// --placement-config` reads), read and checked by [Load] into Pod; Kubeconfig the
// cluster's credentials, "" for the server's own ServiceAccount (in-cluster) or
// kubectl's rules.
type KubernetesPlacement struct {
	Config     string
	Kubeconfig string
	Pod        podspec.Config
	Pos        Pos
}

// BackendKubernetes is the backend of every session of a tenant placed on a cluster.
const BackendKubernetes = "kubernetes"

// Backend is the backend every session of the tenant runs on, or "" when the client
// (or a pool) chooses among the local ones.
func (p Placement) Backend() string {
	if p.Kubernetes != nil {
		return BackendKubernetes
	}
	return ""
}

func decodePlacement(d *strictyaml.Decoder, n *yaml.Node) Placement {
	var p Placement
	d.Mapping(n, "placement",
		strictyaml.Field{Name: "kubernetes", Decode: func(v *yaml.Node) {
			k := &KubernetesPlacement{Pos: strictyaml.PosOf(v)}
			d.Mapping(v, "placement kubernetes",
				strictyaml.Field{Name: "config", Decode: func(v *yaml.Node) { k.Config = absPath(d, v, "placement config") }},
				strictyaml.Field{Name: "kubeconfig", Decode: func(v *yaml.Node) { k.Kubeconfig = absPath(d, v, "placement kubeconfig") }},
			)
			if v.Kind == yaml.MappingNode && !hasKey(v, "config") {
				d.At(v, "placement kubernetes: missing %q", "config")
			}
			p.Kubernetes = k
		}},
	)
	return p
}

// Trusted files of a placement: whoever can change them chooses where and how a
// tenant's sandboxes run, or holds the cluster's credentials.
var (
	placementFile  = trustedFile{"the placement config", "chooses where and how the tenant's sandboxes run"}
	kubeconfigFile = trustedFile{"the kubeconfig", "holds the cluster's credentials"}
)

// loadPlacements reads and checks every tenant's placement config, and checks that
// its kubeconfig is a trusted file: both are read as the config is, and neither may
// be in a tenant's root. A tenant placed on a cluster has pools of that backend only.
func loadPlacements(c *Config) error {
	var errs []error
	byNamespace := map[string]string{} // a namespace's tenant: one each, or tenants share Pods, policies and gc
	for i := range c.Tenants {
		t := &c.Tenants[i]
		k := t.Placement.Kubernetes
		if k == nil {
			for _, p := range t.Pools {
				if p.Backend == BackendKubernetes {
					errs = append(errs, &Error{File: c.File, Pos: p.Pos, Msg: fmt.Sprintf("tenant %q: pool %q: backend kubernetes needs the tenant's placement: kubernetes", t.Name, p.Name)})
				}
			}
			continue
		}
		at := func(err error) {
			errs = append(errs, &Error{File: c.File, Pos: k.Pos, Msg: fmt.Sprintf("tenant %q: placement kubernetes: %v", t.Name, err)})
		}
		for _, f := range []struct {
			path string
			tf   trustedFile
		}{{k.Config, placementFile}, {k.Kubeconfig, kubeconfigFile}} {
			if f.path == "" {
				continue
			}
			if err := outsideTenants(f.path, f.tf.name, c); err != nil {
				at(err)
				continue
			}
			data, err := readTrusted(f.path, f.tf, MaxSize)
			if err != nil {
				at(err)
				continue
			}
			if f.path != k.Config {
				continue
			}
			cfg, err := podspec.DecodeConfig(data)
			if err == nil {
				err = cfg.Validate()
			}
			if err != nil {
				at(fmt.Errorf("%s: %w", k.Config, err))
				continue
			}
			k.Pod = cfg
			if other, ok := byNamespace[cfg.Namespace]; ok {
				at(fmt.Errorf("namespace %q is tenant %q's too: each tenant's sessions need a namespace of their own", cfg.Namespace, other))
				continue
			}
			byNamespace[cfg.Namespace] = t.Name
		}
		for _, p := range t.Pools {
			if p.Backend != "" && p.Backend != BackendKubernetes {
				errs = append(errs, &Error{File: c.File, Pos: p.Pos, Msg: fmt.Sprintf("tenant %q: pool %q: backend %q, but the tenant's sessions are placed on kubernetes", t.Name, p.Name, p.Backend)})
			}
		}
	}
	return errors.Join(errs...)
}
