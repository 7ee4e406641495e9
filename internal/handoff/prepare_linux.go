package handoff

import (
	"os"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/trace"
)

// Prepare begins making the user namespace that idmaps from's files to uid:gid.
func Prepare(from Owner, uid, gid int) *Userns {
	u := &Userns{from: from, uid: uid, gid: gid, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		defer trace.Begin("handoff.userns").End()
		u.f, u.err = linux.IdmapUserns(from.UID, uid, from.GID, gid)
	}()
	return u
}

// file waits for the namespace; it stays u's.
func (u *Userns) file() (*os.File, error) {
	<-u.done
	return u.f, u.err
}

// Close waits for the namespace to be made and releases it. It is idempotent.
func (u *Userns) Close() {
	if u == nil {
		return
	}
	<-u.done
	if u.f != nil {
		u.f.Close()
		u.f = nil
	}
}

// prepared returns the namespace sp.Prepared holds for owner o, or nil.
func (sp *Spec) prepared(o Owner) *Userns {
	for _, u := range sp.Prepared {
		if u != nil && u.from == o && u.uid == sp.UID && u.gid == sp.GID {
			return u
		}
	}
	return nil
}
