package kubernetes

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/owner"
)

// gcTimeout bounds one sweep of the cluster.
const gcTimeout = time.Minute

// bootID is this host's boot id, which tells an owner annotation written here from
// one written on another host (whose processes this one cannot see).
func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// ownerAnnotation is the value of podspec.AnnotationOwner for a session this process
// runs.
func ownerAnnotation() string { return owner.Self().Label() + "@" + bootID() }

// ownerGone reports whether the cordon an owner annotation names has surely exited:
// it ran on this host, in this boot, and is gone. An annotation from another host is
// never judged gone here (that host's cordon may be running); its Pod is swept once
// its process 1 ends, which a broken control stream makes it do.
func ownerGone(annotation string) bool {
	label, boot, ok := strings.Cut(annotation, "@")
	if !ok || boot == "" || boot != bootID() {
		return false
	}
	p, ok := owner.ParseLabel(label)
	return ok && !p.Alive()
}

// GC removes the objects of this tenant's sessions that ended or whose cordon is gone
// (`cordon gc`): nothing when no placement is configured here.
func (b *Backend) GC(ctx context.Context) ([]string, error) {
	if os.Getenv(EnvConfig) == "" {
		return nil, nil
	}
	p, _, _, tenant, err := b.placement()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, gcTimeout)
	defer cancel()
	return p.Sweep(ctx, tenant, ownerGone)
}
