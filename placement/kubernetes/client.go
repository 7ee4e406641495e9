package kubernetes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// RESTConfig is the client config of the cluster the placement places on: the
// kubeconfig at path when one is given; else, inside a Pod (KUBERNETES_SERVICE_HOST
// set), the Pod's ServiceAccount; else kubectl's own rules ($KUBECONFIG, then
// ~/.kube/config). None of these found is an error: there is no default cluster. A
// kubeconfig, and every file it names, is used only when trusted (paths.ReadTrusted).
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
		rc, err = kubectlRules()
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

// kubectlRules is the client config of the kubeconfig files kubectl's rules find
// ($KUBECONFIG's, else ~/.kube/config), merged as kubectl merges them, each file that
// exists and every file they name checked as [kubeconfig] checks one given by path.
// Nothing is migrated or written.
func kubectlRules() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.MigrationRules = nil
	for _, f := range rules.GetLoadingPrecedence() {
		if f == "" {
			continue
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
			continue // kubectl skips a missing one too
		}
		if _, err := paths.ReadTrusted(abs, MaxKubeconfig); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig (whoever can change it chooses the cluster and holds its credentials): %w", err)
		}
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, err
	}
	if err := trustReferences(cfg); err != nil {
		return nil, err
	}
	return clientcmd.NewNonInteractiveClientConfig(*cfg, "", &clientcmd.ConfigOverrides{}, nil).ClientConfig()
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
	if err := trustReferences(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", abs, err)
	}
	return clientcmd.NewNonInteractiveClientConfig(*cfg, "", &clientcmd.ConfigOverrides{}, nil).ClientConfig()
}

// trustReferences checks every file cfg names (made absolute by
// clientcmd.ResolveLocalPaths) as the kubeconfig itself is checked
// ([paths.CheckTrusted]): its CA, client certificate and key, token file, exec plugin
// and oidc issuer CA. Whoever can change one of them holds the cluster identity
// cordon uses (a token or key of their choosing), can stand in for the API server
// (a CA), or runs a command as cordon (the plugin). A plugin named without a
// directory is looked up on $PATH now and used by the path checked, so a directory
// earlier on $PATH cannot supply another later.
func trustReferences(cfg *clientcmdapi.Config) error {
	check := func(what string, p *string) error {
		if *p == "" {
			return nil
		}
		*p = filepath.Clean(*p)
		if _, err := paths.CheckTrusted(*p); err != nil {
			return fmt.Errorf("its %s (whoever can change it holds the cluster's credentials): %w", what, err)
		}
		return nil
	}
	for name, c := range cfg.Clusters {
		if err := check(fmt.Sprintf("cluster %q's certificate-authority", name), &c.CertificateAuthority); err != nil {
			return err
		}
	}
	for name, a := range cfg.AuthInfos {
		for _, f := range []struct {
			what string
			p    *string
		}{{"client-certificate", &a.ClientCertificate}, {"client-key", &a.ClientKey}, {"tokenFile", &a.TokenFile}} {
			if err := check(fmt.Sprintf("user %q's %s", name, f.what), f.p); err != nil {
				return err
			}
		}
		if a.AuthProvider != nil {
			// The oidc provider reads its issuer's CA from this file.
			ca := a.AuthProvider.Config["idp-certificate-authority"]
			if ca != "" && !filepath.IsAbs(ca) {
				return fmt.Errorf("user %q's idp-certificate-authority %q: not an absolute path", name, ca)
			}
			if err := check(fmt.Sprintf("user %q's idp-certificate-authority", name), &ca); err != nil {
				return err
			}
		}
		if a.Exec == nil {
			continue
		}
		if !filepath.IsAbs(a.Exec.Command) {
			found, err := exec.LookPath(a.Exec.Command)
			if err != nil {
				return fmt.Errorf("user %q's exec plugin: %w", name, err)
			}
			if a.Exec.Command, err = filepath.Abs(found); err != nil {
				return err
			}
		}
		if err := check(fmt.Sprintf("user %q's exec plugin", name), &a.Exec.Command); err != nil {
			return err
		}
	}
	return nil
}
