package kubernetes

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// RESTConfig is the client config of the cluster the placement places on: the
// kubeconfig at path when one is given; else, inside a Pod (KUBERNETES_SERVICE_HOST
// set), the Pod's ServiceAccount; else kubectl's own rules ($KUBECONFIG, then
// ~/.kube/config). None of these found is an error: there is no default cluster.
func RESTConfig(path string) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	switch {
	case path != "":
		rc, err = kubeconfig(path)
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		rc, err = rest.InClusterConfig()
	default:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, errdefs.Unavailablef("the cluster's client config: %w", err)
	}
	return rc, nil
}

// NewFromConfig is [New] with a client made from rc.
func NewFromConfig(rc *rest.Config, cfg podspec.Config) (*Placement, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, errdefs.Unavailablef("the cluster's client: %w", err)
	}
	return New(cs, cfg)
}

// MaxKubeconfig bounds the kubeconfig read.
const MaxKubeconfig = 1 << 20

// kubeconfig is the client config of the kubeconfig file at path, which must be
// trusted ([paths.ReadTrusted]): whoever can change it chooses the cluster cordon
// creates sandboxes on and the credentials it sends, and can run a command as cordon
// (an exec credential plugin). Relative paths in it are its directory's, as kubectl
// takes them.
func kubeconfig(path string) (*rest.Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	data, err := paths.ReadTrusted(abs, MaxKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig (whoever can change it chooses the cluster and holds its credentials): %w", err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", abs, err)
	}
	for _, c := range cfg.Clusters {
		c.LocationOfOrigin = abs
	}
	for _, a := range cfg.AuthInfos {
		a.LocationOfOrigin = abs
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", abs, err)
	}
	return clientcmd.NewNonInteractiveClientConfig(*cfg, "", &clientcmd.ConfigOverrides{}, nil).ClientConfig()
}
