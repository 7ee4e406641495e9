// Package handoff starts bwrap as an unprivileged host uid when cordon runs as root.
//
// bwrap run by root maps the sandbox's uid to host uid 0: without capabilities, but
// every permission check on a host object (procfs' sysctls, files bind-mounted in)
// passes as root's. So root's cordon starts bwrap from a mount namespace of its own
// (see [Start]; nothing mounted there is seen by the host, and all of it goes when
// the sandbox does) in which each source bwrap will bind is cloned into a tmpfs the
// sandbox's uid can reach — idmapped when another uid owns it, so that its owner's
// files are the sandbox uid's — and bwrap runs as that uid on the handed-over paths. The
// sandbox then is that uid on the host, and the workspace stays its owner's on disk.
package handoff

import (
	"os"

	"github.com/cordonhq/cordon/internal/paths"
)

// Root is where the hand-off's tmpfs is mounted in its mount namespace: every handed-over
// source is Root/N. It hides the run root below it, in that namespace only.
const Root = paths.HostDir

// Spec is what the hand-off does.
type Spec struct {
	UID int `json:"uid"` // the sandbox's host uid
	GID int `json:"gid"`
	// Sources are handed over at Root/<index>, in order.
	Sources []Source `json:"sources"`
	// Prepared are idmap user namespaces made beforehand ([Prepare]); the hand-off uses the
	// one for a source's owner and these ids, when there is one, and leaves it open.
	Prepared []*Userns `json:"-"`
	// JoinCgroups, when set, is called on the thread that forks cmd just before the
	// fork, and the leave it returns just after: cmd starts in what the thread joined
	// (limit cgroups on cgroup v1, linux.Cgroup.JoinV1). When it fails, cmd starts
	// where the thread was, and the caller moves it.
	JoinCgroups func() (leave func() error, err error) `json:"-"`
	// Netns, when set, is a network namespace made beforehand ([PrepareNetns]) that cmd
	// starts in: the forking thread joins it just before the fork. It stands in for
	// the one bwrap would make inside its own clone (--unshare-net, which the caller
	// then leaves out), so that making it is off the start's path. It stays the
	// caller's, and serves one start: a namespace is one sandbox's.
	Netns *Netns `json:"-"`
}

// Source is one handed-over tree.
type Source struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir"`
	// Idmap, when set, shows the files Idmap.UID and Idmap.GID own as UID's and
	// GID's (a source another uid owns: the contract grants it, readable or
	// writable, to the sandbox).
	Idmap *Owner `json:"idmap,omitempty"`
	// Writable sources must be idmapped; a read-only one whose file system cannot be
	// is handed over as it is (the sandbox then reads it with its own uid's rights: less,
	// never more).
	Writable bool `json:"writable,omitempty"`
	// In is the index of an earlier source Path lies in, or -1: a read-only path
	// inside a writable one is cloned from that one's handed-over tree, and so shares its
	// idmap.
	In int `json:"in"`
	// Overlay, when set, hands the source over as an overlay: the (idmapped) clone of
	// Path is its read-only lower layer and the sandbox's writes go to Overlay.Upper
	// (a staged run). Sources inside it are cloned from the overlay, so that they show
	// what the sandbox sees there and write where it writes.
	Overlay *Overlay `json:"overlay,omitempty"`
	// Inside, when set, mounts the source read-only (nosuid, nodev) in the tree of an
	// earlier source instead of at Root/<index>: bwrap's recursive bind of that tree
	// brings it along, where one bind each would cost bwrap a read of the whole mount
	// table (see runner/bwrap). The mount point must exist there, reached without a
	// link; when it is Path itself (a placeholder bound over itself) it must still be
	// the file the source was cloned from.
	Inside *Place `json:"inside,omitempty"`
	// Sysctls, when set, hands over not Path's tree but the sys directory of a procfs
	// made for this sandbox alone (linux.NewSysctlTree): the sandbox's /proc/sys,
	// read-only, on inodes no other sandbox or host process shares, with nothing
	// mounted below it.
	Sysctls bool `json:"sysctls,omitempty"`
}

// Place is a path inside an earlier source's handed-over tree.
type Place struct {
	Source int    `json:"source"` // its index, below the placing source's
	Rel    string `json:"rel"`    // local to it: no "..", not absolute, not empty
}

// Overlay is a handed-over source's upper and work directories (root's to open, out of
// the sandbox's reach; the upper directory's root is the sandbox uid's).
type Overlay struct {
	Upper string `json:"upper"`
	Work  string `json:"work"`
}

// Owner is a file's owner.
type Owner struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// Netns is a network namespace made in the background by PrepareNetns (Linux): only
// loopback, up, owned by the initial user namespace (so the sandbox holds no
// capability over it, where over bwrap's own it held them until it dropped them). Safe
// for concurrent use.
type Netns struct {
	done chan struct{} // closed once f and err are set
	f    *os.File
	err  error
}

// Userns is an idmap user namespace made in the background by Prepare (Linux), for a
// [Spec]'s Prepared: making one forks and execs a child, which root's cordon would
// otherwise do on the path of every start. Safe for concurrent use.
type Userns struct {
	from     Owner // the owner whose files it shows as the sandbox's
	uid, gid int   // the sandbox's host ids

	done chan struct{} // closed once f and err are set
	f    *os.File
	err  error
}
