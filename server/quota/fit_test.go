package quota

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/config"
)

func TestFit(t *testing.T) {
	q := config.Quotas{Sessions: 4, Memory: 8 * gib, Pids: 8192, CPU: 2,
		Session: config.SessionLimits{Memory: gib, Pids: 512, CPU: 0.5}}
	for _, tc := range []struct {
		name string
		in   contract.LimitsPlan
		want Request
	}{
		{"defaults", contract.LimitsPlan{Memory: contract.DefaultMemory, Pids: contract.DefaultPids, Defaulted: []string{"memory", "pids"}},
			Request{Memory: gib, PIDs: 512, CPU: 0.5}},
		{"set", contract.LimitsPlan{Memory: 3 * gib, Pids: 100, CPU: 1.5}, Request{Memory: 3 * gib, PIDs: 100, CPU: 1.5}},
		{"the whole quota", contract.LimitsPlan{Memory: 8 * gib, Pids: 8192, CPU: 2}, Request{Memory: 8 * gib, PIDs: 8192, CPU: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, r, err := Fit(tc.in, q)
			if err != nil {
				t.Fatal(err)
			}
			if r != tc.want {
				t.Errorf("request: got %+v; want %+v", r, tc.want)
			}
			if l.Memory != r.Memory || l.Pids != r.PIDs || l.CPU != r.CPU || l.Tmpfs != r.Memory || len(l.Defaulted) != 0 {
				t.Errorf("limits %+v do not enforce the request %+v, or are left as defaults a backend may skip", l, r)
			}
		})
	}
	_, _, err := Fit(contract.LimitsPlan{Memory: 0, Pids: 9000, CPU: 3}, q)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("unlimited and too large: %v; want ErrTooLarge, invalid", err)
	}
	for _, want := range []string{"limits.memory: unlimited", "limits.pids: 9000 is more", "limits.cpu: 3 is more"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
}
