package creds_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/local"
)

const crashHelperEnv = "CORDON_CREDS_CRASH_HELPER"

// TestCrashHelper is not a test: run by TestKill9ThenReconcile in a child process, it
// issues two local tokens, prints them, and waits to be killed.
func TestCrashHelper(t *testing.T) {
	root := os.Getenv(crashHelperEnv)
	if root == "" {
		return // only meaningful in the child process TestKill9ThenReconcile starts
	}
	lp, err := local.New(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := creds.New(creds.Config{
		Root: root, Providers: map[string]creds.Provider{"local": lp},
		Redact: func(string, string) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := b.IssueAll(context.Background(), run, []contract.Credential{
		cred("A_TOKEN", "local", time.Hour, map[string]any{"scopes": []any{"read"}}),
		cred("B_TOKEN", "local", time.Hour, map[string]any{"scopes": []any{"write"}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		os.Stdout.WriteString("TOKEN " + g.Secret.Reveal() + "\n")
	}
	time.Sleep(time.Minute)
}

// kill -9 of cordon: nothing runs on the way out. The ledger outlives the process, a
// later Reconcile sees that the owner is gone (pid and start time), revokes, and the
// tokens no longer verify.
func TestKill9ThenReconcile(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ledger")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var toks []string
	sc := bufio.NewScanner(out)
	for len(toks) < 2 && sc.Scan() {
		if tok, ok := strings.CutPrefix(sc.Text(), "TOKEN "); ok {
			toks = append(toks, tok)
		}
	}
	if len(toks) != 2 {
		t.Fatalf("helper printed %d tokens", len(toks))
	}
	for _, tok := range toks {
		if _, err := local.Verify(root, tok, nil, time.Now()); err != nil {
			t.Fatalf("fresh token does not verify: %v", err)
		}
	}

	lp, _ := local.New(root)
	gc := newEnv(t, root, map[string]creds.Provider{"local": lp})
	gc.clock.Set(time.Now())
	// While the helper lives, its grants are its own.
	if res, err := gc.broker.Reconcile(context.Background(), nil); err != nil || len(res) != 0 {
		t.Fatalf("Reconcile while the owner runs: %+v, %v", res, err)
	}

	cmd.Process.Signal(os.Kill)
	cmd.Wait()
	res, err := gc.broker.Reconcile(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Result != creds.Revoked || res[1].Result != creds.Revoked || res[0].Run != run {
		t.Errorf("Reconcile: %+v", res)
	}
	for _, tok := range toks {
		if _, err := local.Verify(root, tok, nil, time.Now()); !errors.Is(err, local.ErrInactive) {
			t.Errorf("token verifies after reconcile: %v", err)
		}
	}
	if files := ledgerFiles(t, root); len(files) != 0 {
		t.Errorf("ledger holds %v", files)
	}
	if _, err := os.Stat(filepath.Join(root, "grants", run)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's ledger directory is left: %v", err)
	}
}

// The same without a process: a broker dropped without RevokeAll, then Reconcile with
// a predicate that declares its run dead.
func TestDroppedBrokerThenReconcile(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ledger")
	lp, _ := local.New(root)
	f := newFake(t)
	e := newEnv(t, root, map[string]creds.Provider{"local": lp, "exec": f})
	gs, err := e.broker.IssueAll(context.Background(), run, []contract.Credential{
		cred("LOCAL", "local", time.Hour, map[string]any{"scopes": []any{"read"}}),
		cred("REMOTE", "exec", time.Hour, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.broker = nil // dropped: no RevokeAll, as after kill -9
	// and a write the crash interrupted
	os.WriteFile(filepath.Join(root, "grants", run, ".LOCAL.json.tmp-123"), []byte("{"), 0o600)

	gc := newEnv(t, root, map[string]creds.Provider{"local": lp, "exec": f})
	if res, _ := gc.broker.Reconcile(context.Background(), func(string) bool { return true }); len(res) != 0 {
		t.Fatalf("alive run reconciled: %+v", res)
	}
	res, err := gc.broker.Reconcile(context.Background(), func(r string) bool { return r != run })
	if err != nil || len(res) != 2 {
		t.Fatalf("Reconcile: %+v, %v", res, err)
	}
	if f.liveCount() != 0 {
		t.Error("the remote grant is still live")
	}
	if _, err := local.Verify(root, gs[0].Secret.Reveal(), nil, t0); !errors.Is(err, local.ErrInactive) {
		t.Errorf("local token verifies after reconcile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "grants", run)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's ledger directory is left: %v", err)
	}
}

// Runs start while another cordon reconciles the same ledger (every run reconciles at
// start): the reconciler must not break a run that is writing its first record, nor
// revoke a live run's grants.
func TestReconcileConcurrentWithStarts(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ledger")
	f := newFake(t)
	gc := newEnv(t, root, map[string]creds.Provider{"exec": f})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				if out, err := gc.broker.Reconcile(context.Background(), nil); err != nil || len(out) != 0 {
					t.Errorf("Reconcile touched live runs: %+v, %v", out, err)
					return
				}
			}
		}
	}()
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			e := newEnv(t, root, map[string]creds.Provider{"exec": f})
			_, err := e.broker.IssueAll(context.Background(), fmt.Sprintf("run-%02d", i), []contract.Credential{
				cred("A", "exec", time.Hour, nil), cred("B", "exec", time.Hour, nil), cred("C", "exec", time.Hour, nil),
			})
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	<-done
	if n := len(ledgerFiles(t, root)); n != 60 || f.liveCount() != 60 {
		t.Errorf("%d records, %d live; want 60, 60", n, f.liveCount())
	}
}

// A crash between making a run's ledger directory and writing its first record leaves
// an empty directory; gc removes it once it is stale, never while it may be a run that
// is starting.
func TestReconcilePrunesStaleEmptyRuns(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ledger")
	gc := newEnv(t, root, map[string]creds.Provider{})
	stale, fresh := filepath.Join(root, "grants", "old-run"), filepath.Join(root, "grants", "new-run")
	for _, d := range []string{stale, fresh} {
		os.Mkdir(d, 0o700)
		os.WriteFile(filepath.Join(d, ".A.json.tmp-1"), []byte("{"), 0o600)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(stale, ".A.json.tmp-1"), old, old)
	if _, err := gc.broker.Reconcile(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(stale, old, old) // its temporary file is gone: now the directory is old and empty
	if _, err := gc.broker.Reconcile(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale empty run directory left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, ".A.json.tmp-1")); err != nil {
		t.Errorf("a starting run's file was removed: %v", err)
	}
}
