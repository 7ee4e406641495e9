package creds_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/internal/event"
)

// fakeProvider is an issuer in memory that remembers what is live, and can be told to
// fail. It checks that Revoke never receives a value.
type fakeProvider struct {
	t *testing.T

	mu          sync.Mutex
	live        map[string]string // revoke ref → token
	issueErr    error
	panicIssue  bool
	revokeFails int // fail this many Revoke calls; -1: all of them
	revokes     int // Revoke calls
	expiresIn   time.Duration
}

func newFake(t *testing.T) *fakeProvider {
	return &fakeProvider{t: t, live: map[string]string{}}
}

func (f *fakeProvider) Issue(_ context.Context, a creds.IssueArgs) (creds.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panicIssue {
		panic("issuer blew up")
	}
	if f.issueErr != nil {
		return creds.Grant{}, f.issueErr
	}
	var b [16]byte
	rand.Read(b[:])
	tok := "fake_" + hex.EncodeToString(b[:])
	ref := a.Run + "/" + a.Credential.Name
	f.live[ref] = tok
	exp := a.Now.Add(a.Credential.TTL)
	if f.expiresIn != 0 {
		exp = a.Now.Add(f.expiresIn)
	}
	return creds.Grant{Secret: creds.NewSecret(tok), ExpiresAt: exp, RevokeRef: ref}, nil
}

func (f *fakeProvider) Revoke(_ context.Context, g creds.Grant) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revokes++
	if !g.Secret.IsZero() {
		f.t.Errorf("Revoke(%s) received the value; it must work from the ledger's record alone", g.Name)
	}
	if f.revokeFails != 0 {
		if f.revokeFails > 0 {
			f.revokeFails--
		}
		return errors.New("issuer unreachable")
	}
	if g.RevokeRef == "" {
		return creds.ErrNoRevokeRef
	}
	delete(f.live, g.RevokeRef)
	return nil
}

func (f *fakeProvider) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

func (f *fakeProvider) setRevokeFails(n int) {
	f.mu.Lock()
	f.revokeFails = n
	f.mu.Unlock()
}

// recorder is an event sink that keeps every event, marshalled as the audit log
// would, so that tests see exactly the bytes the log would store.
type recorder struct {
	mu     sync.Mutex
	events []event.Event
	lines  []string
}

func (r *recorder) Emit(e event.Event) {
	data, err := json.Marshal(e.Body)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.lines = append(r.lines, string(e.Type)+" "+string(data))
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

func (r *recorder) revokes() []event.CredRevokeBody {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event.CredRevokeBody
	for _, e := range r.events {
		if e.Type == event.CredRevoke {
			out = append(out, e.Body.(event.CredRevokeBody))
		}
	}
	return out
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var t0 = time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)

// env is one broker under test and what it reported.
type env struct {
	root     string
	broker   *creds.Broker
	events   *recorder
	alerts   *bytes.Buffer
	clock    *fakeClock
	redacted map[string]string // name → value
	mu       sync.Mutex
}

func newEnv(t *testing.T, root string, providers map[string]creds.Provider) *env {
	t.Helper()
	if root == "" {
		root = filepath.Join(t.TempDir(), "ledger")
	}
	e := &env{root: root, events: &recorder{}, alerts: &bytes.Buffer{}, clock: &fakeClock{t: t0}, redacted: map[string]string{}}
	cfg := creds.Config{
		Root: root, Providers: providers, Events: e.events, Alerts: &syncWriter{w: e.alerts}, Clock: e.clock.Now,
		Redact: func(name, value string) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.redacted[name] = value
			return nil
		},
	}
	creds.FastRetry(&cfg)
	b, err := creds.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.broker = b
	return e
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// ledgerFiles lists the grant records under a ledger root.
func ledgerFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(root, "grants"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func cred(name, provider string, ttl time.Duration, scope map[string]any) contract.Credential {
	return contract.Credential{Name: name, Provider: provider, TTL: ttl, Scope: scope, Why: "test " + name}
}

func readAll(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}
