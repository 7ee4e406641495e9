package gate

import (
	"sort"

	"github.com/cordonhq/cordon/gate/wire"
)

// Log field keys.
const (
	logKeyGate   = "gate"
	logKeyID     = "request"
	logKeyBy     = "by"
	logKeyReason = "reason"
	logKeyErr    = "err"
)

func sortPending(ps []wire.Pending) {
	sort.Slice(ps, func(i, j int) bool {
		if !ps[i].Requested.Equal(ps[j].Requested) {
			return ps[i].Requested.Before(ps[j].Requested)
		}
		return ps[i].ID < ps[j].ID
	})
}
