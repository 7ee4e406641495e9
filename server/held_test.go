package server

import (
	"fmt"
	"testing"
)

func TestHeldLimiter(t *testing.T) {
	l := newHeldLimiter()
	var rel []func()
	for i := 0; i < maxHeldPerTenant; i++ {
		r, q := l.acquire("acme", "agent")
		if r == nil {
			t.Fatalf("slot %d refused (%s)", i, q)
		}
		rel = append(rel, r)
	}
	if r, q := l.acquire("acme", "agent"); r != nil || q != "held_requests" {
		t.Fatalf("past the tenant's bound: got %v %q; want refused held_requests", r != nil, q)
	}
	if r, _ := l.acquire("beta", "agent"); r == nil {
		t.Fatal("another tenant refused while acme is at its bound")
	} else {
		r()
	}
	// The tenant's auditors hold their own slots: their follows never take its agents'.
	if r, _ := l.acquire("acme", "auditor"); r == nil {
		t.Fatal("acme's auditor refused while acme's agents are at their bound")
	} else {
		r()
	}
	rel[0]()
	rel[0]() // a second release is a no-op
	if r, _ := l.acquire("acme", "agent"); r == nil {
		t.Fatal("a released slot is not taken back")
	}
	if l.per[heldKey{"acme", "agent"}] != maxHeldPerTenant {
		t.Fatalf("acme holds %d; want %d", l.per[heldKey{"acme", "agent"}], maxHeldPerTenant)
	}
	// Every tenant together: at most maxHeld, but a tenant holding none is let in once
	// past it (other tenants cannot lock it out): the tenant whose first slot came at
	// the total gets it, and its second is refused.
	l = newHeldLimiter()
	n := 0
	for i := 0; ; i++ {
		r, q := l.acquire(fmt.Sprintf("t%d", i/maxHeldPerTenant), "agent")
		if r == nil {
			if q != "server_held_requests" || n != maxHeld+1 {
				t.Fatalf("refused at %d with %q; want %d, server_held_requests", n, q, maxHeld+1)
			}
			break
		}
		n++
	}
	if r, q := l.acquire("newcomer", "agent"); r == nil {
		t.Fatalf("a tenant holding nothing refused past the total (%s): other tenants locked it out", q)
	}
	if r, q := l.acquire("newcomer", "agent"); r != nil || q != "server_held_requests" {
		t.Fatalf("a tenant's second slot past the total: got %v %q; want refused server_held_requests", r != nil, q)
	}
}
