package tally

import (
	"strings"

	"github.com/cordonhq/cordon/internal/event"
)

// maxAlertKinds bounds the distinct alerts counted per command and per run: a workload
// that raises alerts for a million paths costs cordon a bounded table, and the rest are
// counted under one overflow entry (the audit log has every one).
const maxAlertKinds = 256

// maxAlertTarget bounds an alert's target as the summary shows it.
const maxAlertTarget = 256

// Alert is one kind of monitor alert a command raised: the category of the deviation,
// what it touched and the syscall, counted. Nothing of the contract is in it (the full
// reason, which names the contract's path and why, is in the audit log).
type Alert struct {
	Category string // e.g. "write to a read-only path"
	Target   string // the path, address, program or decoded arguments
	Syscall  string
	Count    int
}

// alertCounts counts monitor alerts by kind, per command and for the whole run. Its
// caller holds the lock.
type alertCounts struct {
	run   alertList
	perID map[string]*alertList
}

// alertList is the alerts of one command (or the run), in the order first seen.
type alertList struct {
	order []Alert
	index map[alertKey]int
}

type alertKey struct{ category, target, syscall string }

func (c *alertCounts) add(cmd string, b event.SyscallAlertBody) {
	a := Alert{Category: b.Category, Target: alertTarget(b), Syscall: b.Syscall, Count: 1}
	if a.Category == "" {
		a.Category = b.Rule // an alert from a monitor that names no category
	}
	c.run.add(a)
	if cmd == "" {
		return
	}
	if c.perID == nil {
		c.perID = map[string]*alertList{}
	}
	l := c.perID[cmd]
	if l == nil {
		l = &alertList{}
		c.perID[cmd] = l
	}
	l.add(a)
}

func (c *alertCounts) forget(cmd string) { delete(c.perID, cmd) }

func (c *alertCounts) list(cmd string) []Alert {
	l := &c.run
	if cmd != "" {
		if l = c.perID[cmd]; l == nil {
			return nil
		}
	}
	return append([]Alert(nil), l.order...)
}

func (l *alertList) add(a Alert) {
	k := alertKey{a.Category, a.Target, a.Syscall}
	if l.index == nil {
		l.index = map[alertKey]int{}
	}
	if i, ok := l.index[k]; ok {
		l.order[i].Count++
		return
	}
	if len(l.order) >= maxAlertKinds {
		k = alertKey{category: "more alerts (see the audit log)"}
		a = Alert{Category: k.category, Count: 1}
		if i, ok := l.index[k]; ok {
			l.order[i].Count++
			return
		}
	}
	l.index[k] = len(l.order)
	l.order = append(l.order, a)
}

// alertTarget is what an alert touched: the path, the address, the program run or the
// decoded arguments of another syscall, bounded.
func alertTarget(b event.SyscallAlertBody) string {
	t := b.Path
	switch {
	case b.Addr != "":
		t = b.Addr
	case t == "" && len(b.Argv) > 0:
		t = strings.Join(b.Argv, " ")
	case t == "":
		t = b.Detail
	}
	if len(t) > maxAlertTarget {
		t = t[:maxAlertTarget] + "…"
	}
	return t
}
