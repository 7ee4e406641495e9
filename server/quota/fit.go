package quota

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/config"
)

// Fit is the limits a served session runs with, and the [Request] it is charged:
// its compiled plan's limits (contract.Plan.Limits), where a limit the contract left
// to cordon's default (memory, pids) or did not set (cpu, which has no default) is
// the tenant's per-session default (quotas.session_default) instead. Every limit is
// then set, and none is a default a backend may skip: a served session that its
// backend cannot hold to its limits must not run, since its quota counts on them.
//
// A contract that lifts a limit (`unlimited`) or sets one larger than the tenant's
// whole quota is refused with [ErrTooLarge] (errdefs.ErrInvalid): no wait could let
// it run. Every such limit is named.
func Fit(l contract.LimitsPlan, q config.Quotas) (contract.LimitsPlan, Request, error) {
	defaulted := func(name string) bool { return slices.Contains(l.Defaulted, name) }
	var errs []error
	if defaulted("memory") {
		l.Memory = q.Session.Memory
	}
	if defaulted("pids") {
		l.Pids = q.Session.Pids
	}
	if l.CPU == 0 {
		l.CPU = q.Session.CPU
	}
	l.Defaulted = slices.DeleteFunc(slices.Clone(l.Defaulted), func(s string) bool { return s == "memory" || s == "pids" })
	if len(l.Defaulted) == 0 {
		l.Defaulted = nil
	}
	for _, f := range []struct {
		name      string
		ask, have float64
	}{
		{"memory", float64(l.Memory), float64(q.Memory)},
		{"pids", float64(l.Pids), float64(q.Pids)},
		{"cpu", l.CPU, q.CPU},
	} {
		switch {
		case f.ask <= 0:
			errs = append(errs, fmt.Errorf("%w: limits.%s: unlimited; a served session's limits are charged to the tenant's quota (%v): set one no larger", ErrTooLarge, f.name, f.have))
		case f.ask > f.have:
			errs = append(errs, fmt.Errorf("%w: limits.%s: %v is more than the tenant's whole quota (%v)", ErrTooLarge, f.name, f.ask, f.have))
		}
	}
	if len(errs) > 0 {
		return contract.LimitsPlan{}, Request{}, errdefs.Invalidf("%w", errors.Join(errs...))
	}
	l.Tmpfs = l.Memory // as contract.Compile sizes every private tmpfs
	return l, Request{Memory: l.Memory, PIDs: l.Pids, CPU: l.CPU}, nil
}
