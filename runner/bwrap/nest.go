package bwrap

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/handoff"
)

// Nesting read-only binds (issue 39). bwrap reads the whole of /proc/self/mountinfo
// for every bind it makes, to apply its flags: with a workspace's protected names (an
// empty .git, .vscode, cordon.yaml, … each a placeholder bound read-only over itself)
// and the masks over host secrets that is 40 binds and hundreds of reads of a growing
// table before the command may start. When root's cordon hands the sources over
// (package handoff), a read-only bind that lands inside the tree of an earlier
// handed-over bind is instead mounted in that tree, read-only, nosuid and nodev, by the
// hand-off (handoff.Source.Inside), and bwrap's one recursive bind of the tree brings it
// along with the flags it would have given it.
//
// That is only done where it cannot change what the sandbox sees: bwrap mounts in
// order, each at a path resolved in the tree built so far, so a bind moves into the
// tree of op j only when j is what its destination lies in just before it (the last
// earlier op whose destination holds it), j's tree shows its source path at its
// destination, and no op left to bwrap between j and it mounts below its destination
// (it would have covered that one). Destinations are compared as written and, for the
// ops left in between, as the host resolves them, so that a link does not hide a
// relation; an argument list with an option not known here, or a destination below a
// link bwrap makes, is left as it is.

// bwrapOption is how many values an option takes and which of them (from 1) is a path
// in the sandbox that it mounts or makes; 0 for none.
type bwrapOption struct{ values, dest int }

// bwrapOptions are the options Args and Exec pass.
var bwrapOptions = map[string]bwrapOption{
	"--unshare-user": {}, "--unshare-pid": {}, "--unshare-net": {}, "--unshare-ipc": {},
	"--unshare-uts": {}, "--unshare-cgroup-try": {}, "--disable-userns": {},
	"--die-with-parent": {}, "--new-session": {}, "--as-pid-1": {},
	"--info-fd": {1, 0}, "--cap-drop": {1, 0}, "--hostname": {1, 0}, "--chdir": {1, 0},
	"--perms": {1, 0}, "--size": {1, 0}, // modify the next op
	"--dev": {1, 1}, "--proc": {1, 1}, "--tmpfs": {1, 1}, "--remount-ro": {1, 1}, "--dir": {1, 1},
	"--bind": {2, 2}, "--ro-bind": {2, 2}, "--symlink": {2, 2}, "--ro-bind-data": {2, 2}, "--ro-bind-try": {2, 2},
}

// bwrapOp is one option of bwrap's arguments.
type bwrapOp struct {
	at, n    int    // its arguments are args[at:at+n]
	dest     string // what it mounts or makes, cleaned; "" for none
	link     bool   // a --symlink
	src      int    // the handed-over source of a bind, or -1
	ro       bool   // a --ro-bind
	modified bool   // follows --perms or --size
}

// parseOps splits args up to "--" into options; ok is false when one is not known.
func parseOps(args []string) (ops []bwrapOp, ok bool) {
	modifier := false
	for i := 0; i < len(args); {
		name := args[i]
		if name == "--" {
			return ops, true
		}
		o, known := bwrapOptions[name]
		if !known || i+o.values >= len(args) {
			return nil, false
		}
		op := bwrapOp{at: i, n: 1 + o.values, src: -1, link: name == "--symlink", modified: modifier}
		if o.dest > 0 {
			op.dest = filepath.Clean(args[i+o.dest])
		}
		if name == "--bind" || name == "--ro-bind" {
			op.ro = name == "--ro-bind"
			op.src = handedIndex(args[i+1])
		}
		modifier = name == "--perms" || name == "--size"
		ops = append(ops, op)
		i += op.n
	}
	return nil, false
}

// handedIndex is N for a handed-over source handoff.Root/N, else -1.
func handedIndex(p string) int {
	rest, ok := strings.CutPrefix(p, handoff.Root+"/")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

// nestHost is what nest asks of the host.
type nestHost struct {
	// reach reports whether rel exists below dir, reached without a link.
	reach func(dir, rel string) bool
	// resolve is p with its links resolved as far as it exists.
	resolve func(p string) string
}

// nest places the read-only binds of args that can go into an earlier handed-over
// tree there (setting srcs[i].Inside) and returns args without them. srcs are the
// handed-over sources args name.
func nest(args []string, srcs []handoff.Source, h nestHost) []string {
	ops, ok := parseOps(args)
	if !ok {
		return args
	}
	for _, o := range ops {
		for _, l := range ops {
			if l.link && o.dest != l.dest && holds(l.dest, o.dest) {
				return args // a destination through a link bwrap makes
			}
		}
	}
	n := nester{ops: ops, nested: make([]bool, len(ops)), resolved: map[int]string{}, h: h}
	for k, o := range ops {
		if !o.ro || o.src < 0 || o.src >= len(srcs) || o.modified {
			continue
		}
		j := n.holder(k)
		if j < 0 {
			continue
		}
		t := ops[j].src
		// A tree that is not its source path's (the sandbox's own sysctls, an
		// overlay) does not show that path at its destination.
		if t < 0 || t >= len(srcs) || ops[j].dest == o.dest || srcs[t].Path != ops[j].dest || srcs[t].Overlay != nil || srcs[t].Sysctls {
			continue
		}
		rel, err := filepath.Rel(ops[j].dest, o.dest)
		if err != nil || !filepath.IsLocal(rel) || !h.reach(srcs[t].Path, rel) {
			continue
		}
		srcs[o.src].Inside = &handoff.Place{Source: t, Rel: rel}
		n.nested[k] = true
	}
	out := make([]string, 0, len(args))
	last := 0
	for k, o := range ops {
		if n.nested[k] {
			out = append(out, args[last:o.at]...)
			last = o.at + o.n
		}
	}
	return append(out, args[last:]...)
}

// nester is nest's state: the ops, which of them are nested so far, and the host's
// resolution of the others' destinations (made once each, when needed).
type nester struct {
	ops      []bwrapOp
	nested   []bool
	resolved map[int]string
	h        nestHost
}

// holder returns the op whose destination ops[k]'s lies in just before it (the last
// earlier op whose destination holds it), or -1 when there is none, or an op left to
// bwrap in between lies at or below ops[k]'s destination, or holds it through a link.
func (n *nester) holder(k int) int {
	o, self := n.ops[k], ""
	for j := k - 1; j >= 0; j-- {
		m := n.ops[j]
		if m.dest == "" {
			continue
		}
		if holds(m.dest, o.dest) {
			return j
		}
		if n.nested[j] {
			continue // link-free below a tree that holds it: compared as written
		}
		if self == "" {
			self = n.h.resolve(o.dest)
		}
		r := n.resolve(j)
		if holds(r, o.dest) || holds(r, self) || holds(m.dest, self) {
			return -1 // o lies in it, through a link
		}
		if holds(o.dest, m.dest) || holds(o.dest, r) || holds(self, m.dest) || holds(self, r) {
			return -1 // mounted below o's place before o: o covered it
		}
	}
	return -1
}

// resolve is the host's resolution of ops[j]'s destination.
func (n *nester) resolve(j int) string {
	r, ok := n.resolved[j]
	if !ok {
		r = n.h.resolve(n.ops[j].dest)
		n.resolved[j] = r
	}
	return r
}

// holds reports whether p is dir or lies below it.
func holds(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}
