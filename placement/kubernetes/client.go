package kubernetes

import (
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cordonhq/cordon/internal/errdefs"
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
		rc, err = clientcmd.BuildConfigFromFlags("", path)
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
