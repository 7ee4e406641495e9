package quota

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAuditUsage: the bytes of regular files, links not followed, a missing root 0.
func TestAuditUsage(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "run1", "events.jsonl"), 1000)
	writeFile(t, filepath.Join(root, "run2", "events.jsonl"), 234)
	big := filepath.Join(t.TempDir(), "big")
	writeFile(t, big, 1<<20)
	if err := os.Symlink(big, filepath.Join(root, "run2", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(big), filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	got, err := AuditUsage(root, 100, time.Now().Add(time.Minute))
	if err != nil || got != 1234 {
		t.Errorf("got %d, %v; want 1234 (links not followed)", got, err)
	}
	if got, err := AuditUsage(filepath.Join(root, "none"), 100, time.Now().Add(time.Minute)); err != nil || got != 0 {
		t.Errorf("a missing root: %d, %v; want 0", got, err)
	}
}

// TestAuditUsageBounded: a tree past the entry bound, or a walk past its deadline,
// stops there with ErrUnmeasured.
func TestAuditUsageBounded(t *testing.T) {
	root := t.TempDir()
	for i := range 1000 {
		writeFile(t, filepath.Join(root, fmt.Sprintf("d%d", i%10), fmt.Sprint(i)), 1)
	}
	got, err := AuditUsage(root, 100, time.Now().Add(time.Minute))
	if !errors.Is(err, ErrUnmeasured) {
		t.Errorf("1000 files, bound 100: %v; want ErrUnmeasured", err)
	}
	if got > 100 {
		t.Errorf("counted %d bytes: walked past the bound", got)
	}
	if _, err := AuditUsage(root, 10_000, time.Now().Add(-time.Second)); !errors.Is(err, ErrUnmeasured) {
		t.Errorf("past the deadline: %v; want ErrUnmeasured", err)
	}
	if got, err := AuditUsage(root, 10_000, time.Now().Add(time.Minute)); err != nil || got != 1000 {
		t.Errorf("within the bounds: %d, %v; want 1000", got, err)
	}
}

// TestReserveAudit: a tenant whose audit root is over its quota, or too large to
// measure, is refused new sessions; the figure is reused for auditEvery, then
// measured again.
func TestReserveAudit(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	l, audit := newLedger(t, testQuotas(), withClock(c), withAuditBound(100))
	r := Request{Memory: 1 << 30, PIDs: 1, CPU: 0.1}
	reserve := func() error {
		rel, err := l.Reserve("a", r)
		if err == nil {
			rel()
		}
		return err
	}
	writeFile(t, filepath.Join(audit, "run1", "events.jsonl"), 1<<19)
	if err := reserve(); err != nil {
		t.Fatalf("half the audit quota: %v", err)
	}
	writeFile(t, filepath.Join(audit, "run2", "events.jsonl"), 1<<19+1)
	if err := reserve(); err != nil {
		t.Errorf("within auditEvery of the last measurement: %v; want the cached figure", err)
	}
	c.add(auditEvery - 10*time.Second)
	if err := reserve(); err != nil {
		t.Errorf("still within auditEvery: %v", err)
	}
	c.add(10 * time.Second)
	e := exceeded(t, reserve(), Audit)
	if e.RetryAfter != auditEvery {
		t.Errorf("Retry-After %v; want %v (the next measurement)", e.RetryAfter, auditEvery)
	}
	os.RemoveAll(filepath.Join(audit, "run2"))
	for i := range 200 {
		writeFile(t, filepath.Join(audit, "many", fmt.Sprint(i)), 1)
	}
	c.add(auditEvery)
	exceeded(t, reserve(), Audit) // unmeasured: refused, the safe answer
	if n, _ := l.Used("a"); n != 0 {
		t.Errorf("refusals charged %d sessions", n)
	}
}
