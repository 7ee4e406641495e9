package quota

import (
	"fmt"

	"github.com/cordonhq/cordon/server/disk"
)

// diskRetry is the Retry-After of a full disk: only the tenant deleting makes room.
const diskRetry = maxRetry

// diskCheck refuses a new session when the tenant's disk (quotas.disk) has less than
// a hundredth of it left for sandboxes: the session could write nothing. A disk that
// cannot be measured is an error, not a pass.
func (a *account) diskCheck() error {
	if a.q.Disk == 0 {
		return nil
	}
	size, avail, err := disk.Space(a.root)
	if err != nil {
		return fmt.Errorf("measuring the tenant's disk: %w", err)
	}
	if avail < size/100 {
		return &Exceeded{Quota: Disk, RetryAfter: diskRetry,
			Detail: fmt.Sprintf("the tenant's disk has %d of %d bytes left; delete workspaces or runs", avail, size)}
	}
	return nil
}
