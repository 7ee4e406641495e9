package creds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/owner"
)

// Config configures a [Broker]. Zero fields mean defaults.
type Config struct {
	// Root is the ledger's directory (created 0700; refused if another user owns it or
	// may write it); "" means [DefaultRoot].
	Root string
	// Providers maps a contract's provider name (local, exec, github-app, vault) to
	// its implementation. A credential whose provider is missing fails to issue with
	// [ErrNoProvider].
	Providers map[string]Provider
	// Redact registers an issued value under the credential's name with the audit
	// log's redactor (audit.Redactor.Add), before the value is handed out. IssueAll
	// refuses to issue anything without it: an unredacted value would reach the log.
	Redact func(name, value string) error
	// Events receives cred.issue and cred.revoke; nil discards them.
	Events event.Sink
	// Logger receives diagnostics (never values); nil discards them.
	Logger *slog.Logger
	// Alerts is where a credential that could not be revoked is printed, loudly; nil
	// means os.Stderr.
	Alerts io.Writer
	// Clock is the broker's time (expiry, and the issue time providers sign); nil
	// means time.Now.
	Clock func() time.Time

	retry retryPolicy // zero means defaultRetry; tests shorten it
}

// retryPolicy bounds how long issuing and revoking may take.
type retryPolicy struct {
	attempts int           // revocation attempts per grant
	backoff  time.Duration // wait before the second attempt, doubled after each
	attempt  time.Duration // limit of one Revoke call
	total    time.Duration // limit of one RevokeAll
	issue    time.Duration // limit of one Issue call
}

var defaultRetry = retryPolicy{
	attempts: 4, backoff: 500 * time.Millisecond,
	attempt: 10 * time.Second, total: 30 * time.Second, issue: 30 * time.Second,
}

// expiryGrace is how long after its recorded expiry a credential that could not be
// revoked is taken to be dead: the issuer's clock may be behind ours.
const expiryGrace = 2 * time.Minute

// Broker issues a run's credentials and revokes them. Create one per run with [New].
// It is safe for concurrent use by multiple goroutines; a RevokeAll that runs while
// IssueAll is still issuing revokes what was issued so far, so call RevokeAll (again)
// once IssueAll has returned, as teardown does.
type Broker struct {
	cfg    Config
	now    func() time.Time
	ledger *ledger
	me     owner.Process

	revokeMu sync.Mutex // serialises RevokeAll calls, so that a second waits for the first

	// mu guards the fields below.
	mu   sync.Mutex
	run  string    // the run IssueAll was called for
	live []*record // issued and not yet revoked, in issue order
}

// New opens the ledger and returns a broker.
func New(cfg Config) (*Broker, error) {
	if cfg.Root == "" {
		cfg.Root = DefaultRoot()
	}
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Alerts == nil {
		cfg.Alerts = os.Stderr
	}
	if cfg.retry == (retryPolicy{}) {
		cfg.retry = defaultRetry
	}
	l, err := openLedger(cfg.Root)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, now: cfg.Clock, ledger: l, me: owner.Self()}
	if b.now == nil {
		b.now = time.Now
	}
	return b, nil
}

// IssueAll issues every credential for run, in order, all or nothing: if one fails,
// those already issued are revoked before IssueAll returns an [*IssueError] naming it.
// Each value is registered with Config.Redact and each grant recorded in the ledger
// before IssueAll returns it. A broker serves one run.
func (b *Broker) IssueAll(ctx context.Context, run string, creds []contract.Credential) ([]Grant, error) {
	if !runIDPattern().MatchString(run) {
		return nil, errdefs.Invalidf("bad run id %q", run)
	}
	if len(creds) == 0 {
		return nil, nil
	}
	if b.cfg.Redact == nil {
		return nil, errors.New("issuing credentials: no audit redactor configured; refusing to issue values the log could not redact")
	}
	b.mu.Lock()
	if b.run != "" && b.run != run {
		b.mu.Unlock()
		return nil, fmt.Errorf("issuing credentials for run %s: this broker serves run %s", run, b.run)
	}
	b.run = run
	b.mu.Unlock()

	seen := map[string]bool{}
	out := make([]Grant, 0, len(creds))
	for _, c := range creds {
		if c.TTL <= 0 {
			c.TTL = DefaultTTL
		}
		if c.Deliver == "" {
			c.Deliver = contract.DeliverEnv
		}
		var err error
		var g Grant
		switch {
		case !namePattern().MatchString(c.Name):
			err = errdefs.Invalidf("not a valid name")
		case seen[c.Name]:
			err = errdefs.Invalidf("declared twice")
		default:
			g, err = b.issue(ctx, run, c)
		}
		seen[c.Name] = true
		if err != nil {
			ierr := &IssueError{Name: c.Name, Provider: c.Provider, Err: err}
			b.cfg.Logger.Error("issuing credential failed; revoking those already issued", logKeyRun, run, logKeyName, c.Name, logKeyProvider, c.Provider, logKeyErr, err)
			return nil, errors.Join(ierr, b.revokeLive(ctx, "rollback: "+c.Name+" could not be issued"))
		}
		out = append(out, g)
	}
	return out, nil
}

// issue issues one credential: a pending ledger record first (so that a crash is seen),
// then the provider, then the record with what revocation needs, the cred.issue event,
// and the value registered with the redactor.
func (b *Broker) issue(ctx context.Context, run string, c contract.Credential) (Grant, error) {
	p := b.cfg.Providers[c.Provider]
	if p == nil {
		return Grant{}, fmt.Errorf("%w on this host: %s", ErrNoProvider, c.Provider)
	}
	now := b.now()
	rec := &record{
		V: ledgerVersion, Run: run, Name: c.Name, Provider: c.Provider, Deliver: c.Deliver, Scope: c.Scope,
		TTLSec: int64(c.TTL / time.Second), State: statePending,
		IssuedAt: now, ExpiresAt: now.Add(c.TTL), Owner: b.me,
	}
	if err := b.ledger.put(rec); err != nil {
		return Grant{}, err
	}
	ictx, cancel := context.WithTimeout(ctx, b.cfg.retry.issue)
	g, err := p.Issue(ictx, IssueArgs{Run: run, Credential: c, Now: now})
	cancel()
	if err != nil {
		b.ledger.remove(run, c.Name)
		return Grant{}, err
	}
	g.Run, g.Name, g.Provider, g.Deliver, g.Scope, g.IssuedAt = run, c.Name, c.Provider, c.Deliver, c.Scope, now
	if g.ID == "" {
		g.ID = Fingerprint(g.Secret.Reveal())
	}
	rec.State, rec.ID, rec.RevokeRef = stateIssued, g.ID, g.RevokeRef
	if !g.ExpiresAt.IsZero() {
		rec.ExpiresAt = g.ExpiresAt // else the ttl asked for stays the best guess
	}
	rec.SHA256 = hashHex(g.Secret.Reveal())
	// From here on, a failure revokes this grant too.
	b.mu.Lock()
	b.live = append(b.live, rec)
	b.mu.Unlock()
	switch {
	case g.Secret.IsZero():
		return Grant{}, errors.New("the provider returned an empty value")
	case g.ExpiresAt.IsZero():
		return Grant{}, errors.New("the provider returned no expiry")
	case !g.ExpiresAt.After(now):
		return Grant{}, fmt.Errorf("the provider returned a credential that expired at %s", rfc3339(g.ExpiresAt))
	}
	if err := b.ledger.put(rec); err != nil {
		return Grant{}, err
	}
	b.cfg.Events.Emit(event.Event{Type: event.CredIssue, Time: now, Body: event.CredIssueBody{
		Name: g.Name, Provider: g.Provider, ID: g.ID, Deliver: string(g.Deliver), Scope: g.Scope,
		TTLSec: rec.TTLSec, Expires: rfc3339(g.ExpiresAt), Reason: c.Why,
	}})
	if err := b.cfg.Redact(c.Name, g.Secret.Reveal()); err != nil {
		return Grant{}, fmt.Errorf("registering the value with the audit redactor: %w", err)
	}
	b.cfg.Logger.Debug("credential issued", logKeyRun, run, logKeyName, g.Name, logKeyProvider, g.Provider, logKeyID, g.ID, logKeyExpires, g.ExpiresAt)
	return g, nil
}

// RevokeAll revokes every grant this broker issued and has not revoked yet, in
// parallel, retrying each with backoff. It ignores ctx's cancellation (teardown
// survives it: call it with the run's context after a signal) and is bounded by its
// own timeout. It is idempotent: grants revoked are forgotten, so a second call
// revokes nothing, or retries what failed. A grant that could not be revoked stays in
// the ledger for gc, is reported by a cred.revoke event with alert set and by a
// message on Config.Alerts, and makes RevokeAll return [ErrNotRevoked].
func (b *Broker) RevokeAll(ctx context.Context) error {
	return b.revokeLive(ctx, "run ended")
}

func (b *Broker) revokeLive(ctx context.Context, reason string) error {
	b.revokeMu.Lock()
	defer b.revokeMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.retry.total)
	defer cancel()
	b.mu.Lock()
	live := b.live
	b.live = nil
	b.mu.Unlock()

	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, r := range live {
		wg.Go(func() { errs[i] = b.revokeOne(ctx, r, reason) })
	}
	wg.Wait()
	var keep []*record
	for i, err := range errs {
		if err != nil {
			keep = append(keep, live[i])
		}
	}
	b.mu.Lock()
	b.live = append(keep, b.live...)
	b.mu.Unlock()
	return errors.Join(errs...)
}

// revokeOne settles one of this run's grants and reports it.
func (b *Broker) revokeOne(ctx context.Context, r *record, reason string) error {
	result, attempts, err := b.settle(ctx, r)
	ev := event.CredRevokeBody{
		Name: r.Name, Provider: r.Provider, ID: r.ID, Outcome: result, Attempts: attempts,
		Expires: rfc3339(r.ExpiresAt), Reason: reason, Alert: result == Failed,
	}
	if err != nil {
		ev.Error = err.Error()
	}
	b.cfg.Events.Emit(event.Event{Type: event.CredRevoke, Time: b.now(), Body: ev})
	return b.report(r, result, attempts, err)
}

// settle revokes a recorded grant with retries and removes its record unless it is
// still valid.
func (b *Broker) settle(ctx context.Context, r *record) (result string, attempts int, err error) {
	attempts, err = b.revoke(ctx, b.cfg.Providers[r.Provider], r.grant())
	switch {
	case err == nil:
		result = Revoked
	case !b.now().Before(r.ExpiresAt.Add(expiryGrace)):
		result = Expired
	default:
		return Failed, attempts, err
	}
	if rerr := b.ledger.remove(r.Run, r.Name); rerr != nil {
		// The credential is dead; a stale record only makes gc revoke it again.
		b.cfg.Logger.Warn("removing a ledger record", logKeyRun, r.Run, logKeyName, r.Name, logKeyErr, rerr)
	}
	return result, attempts, err
}

// revoke calls p.Revoke until it succeeds, attempts run out or ctx ends.
func (b *Broker) revoke(ctx context.Context, p Provider, g Grant) (attempts int, err error) {
	if p == nil {
		return 0, fmt.Errorf("%w on this host: %s", ErrNoProvider, g.Provider)
	}
	wait := b.cfg.retry.backoff
	for attempts = 1; ; attempts++ {
		actx, cancel := context.WithTimeout(ctx, b.cfg.retry.attempt)
		err = p.Revoke(actx, g)
		cancel()
		if err == nil || errors.Is(err, ErrNoRevokeRef) || attempts >= b.cfg.retry.attempts {
			return attempts, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempts, err
		case <-t.C:
		}
		wait *= 2
	}
}

// report logs a settled grant; a failure is also printed on Config.Alerts and
// returned as ErrNotRevoked.
func (b *Broker) report(r *record, result string, attempts int, err error) error {
	log := b.cfg.Logger.With(logKeyRun, r.Run, logKeyName, r.Name, logKeyProvider, r.Provider, logKeyID, r.ID, logKeyOutcome, result, logKeyAttempts, attempts)
	switch result {
	case Revoked:
		log.Debug("credential revoked")
		return nil
	case Expired:
		log.Warn("credential could not be revoked but has expired", logKeyExpires, r.ExpiresAt, logKeyErr, err)
		return nil
	}
	log.Error("credential NOT revoked", logKeyExpires, r.ExpiresAt, logKeyErr, err)
	fmt.Fprintf(b.cfg.Alerts, "cordon: ALERT: credential %s (%s, id %s) of run %s was NOT revoked after %d attempt(s): %v\n"+
		"cordon: ALERT: it stays valid until %s; the ledger keeps it and `cordon gc` retries; revoke it at its issuer if you can\n",
		r.Name, r.Provider, r.ID, r.Run, attempts, err, rfc3339(r.ExpiresAt))
	return fmt.Errorf("%w: %s (%s, id %s, valid until %s): %w", ErrNotRevoked, r.Name, r.Provider, r.ID, rfc3339(r.ExpiresAt), err)
}
