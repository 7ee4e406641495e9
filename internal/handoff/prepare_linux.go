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

// PrepareNetns begins making a sandbox's network namespace (see [Spec.Netns]).
func PrepareNetns() *Netns {
	n := &Netns{done: make(chan struct{})}
	go func() {
		defer close(n.done)
		defer trace.Begin("handoff.netns").End()
		n.f, n.err = linux.NewLoopbackNetns()
	}()
	return n
}

// file waits for the namespace; it stays n's.
func (n *Netns) file() (*os.File, error) {
	<-n.done
	return n.f, n.err
}

// Close waits for the namespace to be made and releases it (a sandbox started in it
// keeps it). It is idempotent.
func (n *Netns) Close() {
	if n == nil {
		return
	}
	<-n.done
	if n.f != nil {
		n.f.Close()
		n.f = nil
	}
}
