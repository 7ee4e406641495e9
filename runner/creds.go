package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/providers"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// issueCredentials issues the plan's task-scoped credentials after the audit log is
// open (their values are redacted from it) and before anything runs. A provider that
// fails refuses the run; what was already issued is revoked by the broker.
func (r *run) issueCredentials(ctx context.Context, host *Host) error {
	if len(r.plan.Credentials) == 0 {
		return nil
	}
	root := creds.DefaultRoot()
	provs, err := providers.FromEnv(providers.Config{Root: root, Need: providers.Needed(r.plan.Credentials), Stderr: r.o.Stderr})
	if err != nil {
		return fmt.Errorf("%w: credentials: %v", errdefs.ErrUnavailable, err)
	}
	broker, err := creds.New(creds.Config{
		Root: root, Providers: provs, Redact: r.log.Redactor().Add, Events: r.sink,
		Alerts: r.o.Stderr, Logger: r.o.Log,
	})
	if err != nil {
		return fmt.Errorf("%w: credentials: %v", errdefs.ErrUnavailable, err)
	}
	r.broker = broker
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := broker.Reconcile(rctx, nil); err != nil {
		r.o.Log.Warn("reconciling credentials of crashed runs", "err", err)
	}
	cancel()
	grants, err := broker.IssueAll(ctx, r.res.RunID, r.plan.Credentials)
	if err != nil {
		return fmt.Errorf("%w: credentials: %v", errdefs.ErrUnavailable, err)
	}
	host.Env = append(host.Env, creds.Env(grants)...)
	for _, g := range grants {
		if g.Deliver == "file" {
			host.SecretFiles = append(host.SecretFiles, SecretFile{Name: g.Name, Value: g.Secret.Reveal()})
		}
	}
	return nil
}

// revokeCredentials revokes everything the run was issued. It runs first in teardown,
// on every exit path, and ignores cancellation (the broker bounds it).
func (r *run) revokeCredentials(ctx context.Context) error {
	if r.broker == nil {
		return nil
	}
	return r.broker.RevokeAll(context.WithoutCancel(ctx))
}
