package runner

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/providers"
	"github.com/cordonhq/cordon/egress"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/hostexec"
	"github.com/cordonhq/cordon/internal/secret"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// issueCredentials issues the plan's task-scoped credentials after the audit log is
// open (their values are redacted from it) and before anything runs. A provider that
// fails refuses the run; what was already issued is revoked by the broker.
//
// Credentials delivered by proxy reach the sandbox as placeholders; their values go
// only to the returned Intercept, for the egress proxy, with a CA minted for this run
// whose certificate the sandbox trusts (see [caBundle]).
func (r *run) issueCredentials(ctx context.Context, host *sandbox.Host) (*egress.Intercept, error) {
	if len(r.plan.Credentials) == 0 {
		return nil, nil
	}
	root := creds.DefaultRoot()
	provs, err := providers.FromEnv(providers.Config{Root: root, Need: providers.Needed(r.plan.Credentials), Stderr: r.o.Stderr, Policy: hostexec.PolicyOf(r.plan.HostWritable())})
	if err != nil {
		return nil, errdefs.Unavailablef("credentials: %w", err)
	}
	broker, err := creds.New(creds.Config{
		Root: root, Providers: provs, Redact: r.log.Redactor().Add, Events: r.sink,
		Alerts: r.o.Stderr, Logger: r.o.Log,
	})
	if err != nil {
		return nil, errdefs.Unavailablef("credentials: %w", err)
	}
	r.broker = broker
	r.undo.add("revoking credentials", func(ctx context.Context) error {
		err := r.revokeCredentials(ctx)
		if err != nil {
			fmt.Fprintf(r.o.Stderr, "cordon: ALERT: %v\n", err)
		}
		return err
	})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := broker.Reconcile(rctx, nil); err != nil {
		r.o.Log.Warn("reconciling credentials of crashed runs", "err", err)
	}
	cancel()
	grants, err := broker.IssueAll(ctx, r.res.RunID, r.plan.Credentials)
	if err != nil {
		return nil, errdefs.Unavailablef("credentials: %w", err)
	}
	host.Env = append(host.Env, creds.Env(grants)...)
	var ic *egress.Intercept
	for _, g := range grants {
		switch g.Deliver {
		case "file":
			host.SecretFiles = append(host.SecretFiles, sandbox.SecretFile{Name: g.Name, Value: g.Secret})
		case "proxy":
			if ic == nil {
				ca, err := egress.NewCA(r.res.RunID)
				if err != nil {
					return nil, errdefs.Unavailablef("credentials: %w", err)
				}
				ic = &egress.Intercept{CA: ca}
			}
			ph := creds.Placeholder(g.Secret.Reveal())
			ic.Credentials = append(ic.Credentials, egress.Credential{
				Name: g.Name, Hosts: hostsOf(r.plan, g.Name), Placeholder: ph, Value: g.Secret,
			})
			host.Env = append(host.Env, g.Name+"="+ph)
		}
	}
	if ic != nil {
		bundle := caBundle(ic.CA.CertPEM())
		host.SecretFiles = append(host.SecretFiles, sandbox.SecretFile{Name: creds.CABundleFile, Value: secret.New(string(bundle))})
		for _, k := range creds.CAEnv {
			host.Env = append(host.Env, k+"="+creds.SecretsDir+"/"+creds.CABundleFile)
		}
	}
	return ic, nil
}

// hostsOf returns the hosts of the plan's credential name.
func hostsOf(plan *contract.Plan, name string) []string {
	for _, c := range plan.Credentials {
		if c.Name == name {
			return slices.Clone(c.Hosts)
		}
	}
	return nil
}

// systemBundles are where Linux distributions keep their CA bundle (the list Go's
// crypto/x509 reads), after $SSL_CERT_FILE.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS
	"/etc/ssl/cert.pem",                                 // Alpine, macOS
}

// caBundle returns the host's CA bundle followed by the run CA, so that a client pointed
// at it trusts every destination it trusted before plus the proxy's certificates for the
// credential's hosts. Without a host bundle it is the run CA alone.
func caBundle(runCA []byte) []byte {
	paths := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		paths = append([]string{f}, paths...)
	}
	var out []byte
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil && len(data) > 0 {
			out = append(data, '\n')
			break
		}
	}
	return append(out, runCA...)
}

// revokeCredentials revokes everything the run was issued. It is undone right after the
// gates close (they start later, so no operation is minting meanwhile), on every exit
// path; it ignores cancellation (the broker bounds it).
func (r *run) revokeCredentials(ctx context.Context) error {
	if r.broker == nil {
		return nil
	}
	return r.broker.RevokeAll(context.WithoutCancel(ctx))
}
