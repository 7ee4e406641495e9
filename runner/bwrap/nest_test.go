package bwrap

import (
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/handoff"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// r is the handed-over path of source n.
func r(n int) string { return filepath.Join(handoff.Root, strconv.Itoa(n)) }

func TestNest(t *testing.T) {
	type src struct {
		path             string
		overlay, sysctls bool
	}
	cases := []struct {
		name    string
		args    string // space-separated, "--" and the command appended
		srcs    []src
		links   map[string]string // resolve: host links, by path prefix
		missing []string          // what reach does not find
		want    string            // the args left to bwrap
		inside  map[int]handoff.Place
	}{{
		name:   "placeholders into the workspace",
		args:   "--bind R0 /w --ro-bind R1 /w/.git --ro-bind R2 /w/.vscode",
		srcs:   []src{{path: "/w"}, {path: "/w/.git"}, {path: "/w/.vscode"}},
		want:   "--bind R0 /w",
		inside: map[int]handoff.Place{1: {Source: 0, Rel: ".git"}, 2: {Source: 0, Rel: ".vscode"}},
	}, {
		name:   "a mask into a read-only tree",
		args:   "--ro-bind R0 /etc --tmpfs /tmp --ro-bind R1 /etc/shadow",
		srcs:   []src{{path: "/etc"}, {path: "/run/x/mask-file"}},
		want:   "--ro-bind R0 /etc --tmpfs /tmp",
		inside: map[int]handoff.Place{1: {Source: 0, Rel: "shadow"}},
	}, {
		name:   "one inside another placed one",
		args:   "--bind R0 /w --ro-bind R1 /w/.git --ro-bind R2 /w/.git/hooks",
		srcs:   []src{{path: "/w"}, {path: "/w/.git"}, {path: "/w/.git/hooks"}},
		want:   "--bind R0 /w",
		inside: map[int]handoff.Place{1: {Source: 0, Rel: ".git"}, 2: {Source: 1, Rel: "hooks"}},
	}, {
		name: "writable binds stay bwrap's",
		args: "--bind R0 /w --bind R1 /w/out",
		srcs: []src{{path: "/w"}, {path: "/w/out"}},
		want: "--bind R0 /w --bind R1 /w/out",
	}, {
		name:   "into a writable bind between",
		args:   "--bind R0 /w --bind R1 /w/s --ro-bind R2 /w/s/key.pem",
		srcs:   []src{{path: "/w"}, {path: "/w/s"}, {path: "/run/x/mask-file"}},
		want:   "--bind R0 /w --bind R1 /w/s",
		inside: map[int]handoff.Place{2: {Source: 1, Rel: "key.pem"}},
	}, {
		name: "an op between mounts where it lies",
		args: "--bind R0 /w --tmpfs /w/a --ro-bind R1 /w/a/b",
		srcs: []src{{path: "/w"}, {path: "/w/a/b"}},
		want: "--bind R0 /w --tmpfs /w/a --ro-bind R1 /w/a/b",
	}, {
		name: "an op between mounts below it",
		args: "--bind R0 /w --tmpfs /w/a/b --ro-bind R1 /w/a",
		srcs: []src{{path: "/w"}, {path: "/w/a"}},
		want: "--bind R0 /w --tmpfs /w/a/b --ro-bind R1 /w/a",
	}, {
		name:  "an op between mounts below it through a host link",
		args:  "--bind R0 /w --ro-bind-data 5 /l/x --ro-bind R1 /w/a",
		srcs:  []src{{path: "/w"}, {path: "/w/a"}},
		links: map[string]string{"/l": "/w/a"},
		want:  "--bind R0 /w --ro-bind-data 5 /l/x --ro-bind R1 /w/a",
	}, {
		name:  "an op between mounts where it lies through a host link",
		args:  "--bind R0 /w --tmpfs /l --ro-bind R1 /w/a/b",
		srcs:  []src{{path: "/w"}, {path: "/w/a/b"}},
		links: map[string]string{"/l": "/w/a"},
		want:  "--bind R0 /w --tmpfs /l --ro-bind R1 /w/a/b",
	}, {
		name:   "unrelated ops between",
		args:   "--bind R0 /w --tmpfs /tmp/x --ro-bind-data 5 /run/s/k --ro-bind R1 /w/a",
		srcs:   []src{{path: "/w"}, {path: "/w/a"}},
		want:   "--bind R0 /w --tmpfs /tmp/x --ro-bind-data 5 /run/s/k",
		inside: map[int]handoff.Place{1: {Source: 0, Rel: "a"}},
	}, {
		name:    "a place not reached without a link",
		args:    "--bind R0 /w --ro-bind R1 /w/a --ro-bind R2 /w/b",
		srcs:    []src{{path: "/w"}, {path: "/w/a"}, {path: "/w/b"}},
		missing: []string{"/w/a"},
		want:    "--bind R0 /w --ro-bind R1 /w/a",
		inside:  map[int]handoff.Place{2: {Source: 0, Rel: "b"}},
	}, {
		name: "a tree that does not show its source at its place",
		args: "--ro-bind R0 /etc/ssl/private --ro-bind R1 /etc/ssl/private/k",
		srcs: []src{{path: "/run/x/mask-dir"}, {path: "/run/x/mask-file"}},
		want: "--ro-bind R0 /etc/ssl/private --ro-bind R1 /etc/ssl/private/k",
	}, {
		name: "a staged workspace's overlay",
		args: "--bind R0 /w --ro-bind R1 /w/.git",
		srcs: []src{{path: "/w", overlay: true}, {path: "/w/.git"}},
		want: "--bind R0 /w --ro-bind R1 /w/.git",
	}, {
		// The sandbox's own sysctls are no clone of /proc/sys: the host's kernel
		// directory granted readable is bwrap's to bind over theirs.
		name: "into the sandbox's sysctls",
		args: "--ro-bind R0 /proc/sys --ro-bind R1 /proc/sys/kernel",
		srcs: []src{{path: "/proc/sys", sysctls: true}, {path: "/proc/sys/kernel"}},
		want: "--ro-bind R0 /proc/sys --ro-bind R1 /proc/sys/kernel",
	}, {
		name: "the same place twice",
		args: "--bind R0 /w --ro-bind R1 /w",
		srcs: []src{{path: "/w"}, {path: "/w"}},
		want: "--bind R0 /w --ro-bind R1 /w",
	}, {
		name: "a destination through a link bwrap makes",
		args: "--symlink usr/bin /bin --ro-bind R0 /usr --tmpfs /bin/x/y --ro-bind R1 /usr/bin/x",
		srcs: []src{{path: "/usr"}, {path: "/run/x/mask-file"}},
		want: "--symlink usr/bin /bin --ro-bind R0 /usr --tmpfs /bin/x/y --ro-bind R1 /usr/bin/x",
	}, {
		name: "a bind that is not handed over",
		args: "--bind /w /w --ro-bind R0 /w/a",
		srcs: []src{{path: "/w/a"}},
		want: "--bind /w /w --ro-bind R0 /w/a",
	}, {
		name: "an option not known here",
		args: "--bind R0 /w --overlay-src /x --ro-bind R1 /w/a",
		srcs: []src{{path: "/w"}, {path: "/w/a"}},
		want: "--bind R0 /w --overlay-src /x --ro-bind R1 /w/a",
	}, {
		name: "a modified bind",
		args: "--bind R0 /w --perms 0700 --ro-bind R1 /w/a",
		srcs: []src{{path: "/w"}, {path: "/w/a"}},
		want: "--bind R0 /w --perms 0700 --ro-bind R1 /w/a",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := strings.Fields(c.args + " -- /init internal init")
			for i, a := range args {
				if n, ok := strings.CutPrefix(a, "R"); ok {
					k, _ := strconv.Atoi(n)
					args[i] = r(k)
				}
			}
			srcs := make([]handoff.Source, len(c.srcs))
			for i, s := range c.srcs {
				srcs[i] = handoff.Source{Path: s.path, In: -1}
				if s.overlay {
					srcs[i].Overlay = &handoff.Overlay{Upper: "/u", Work: "/wk"}
				}
				srcs[i].Sysctls = s.sysctls
			}
			h := nestHost{
				reach: func(dir, rel string) bool {
					for _, m := range c.missing {
						if holds(m, filepath.Join(dir, rel)) {
							return false
						}
					}
					return true
				},
				resolve: func(p string) string {
					for from, to := range c.links {
						if rest, ok := strings.CutPrefix(p, from); ok && (rest == "" || rest[0] == '/') {
							return to + rest
						}
					}
					return p
				},
			}
			got := nest(args, srcs, h)
			want := strings.Fields(c.want + " -- /init internal init")
			for i, a := range want {
				if n, ok := strings.CutPrefix(a, "R"); ok {
					k, _ := strconv.Atoi(n)
					want[i] = r(k)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("args:\n got %q\nwant %q", got, want)
			}
			for i, s := range srcs {
				w, ok := c.inside[i]
				switch {
				case !ok && s.Inside != nil:
					t.Errorf("source %d placed at %+v; want it left to bwrap", i, *s.Inside)
				case ok && (s.Inside == nil || *s.Inside != w):
					t.Errorf("source %d placed at %+v; want %+v", i, s.Inside, w)
				}
			}
		})
	}
}

// Every option Args and Exec pass is known to parseOps: one that is not turns nesting
// off for the whole run, silently slower.
func TestArgsOptionsKnown(t *testing.T) {
	plan := &contract.Plan{
		Workspace: "/w", Workdir: "/w",
		Links: []contract.Link{{Path: "/bin", Target: "usr/bin"}},
		Mounts: []contract.Mount{
			{Path: "/usr", Type: contract.Bind, Access: contract.ReadOnly, Dir: true},
			{Path: "/tmp", Type: contract.Tmpfs},
			{Path: "/w", Type: contract.Bind, Access: contract.ReadWrite, Dir: true},
			{Path: "/w/.git", Type: contract.Bind, Access: contract.ReadOnly, Dir: true},
			{Path: "/etc/shadow", Type: contract.Mask},
			{Path: "/etc/ssl/private", Type: contract.Mask, Dir: true},
		},
	}
	plan.Limits.Tmpfs = 1 << 20
	host := sandbox.Host{
		Init: "/r/cordon-init", MaskFile: "/r/mask-file", MaskDir: "/r/mask-dir",
		ControlSocket: "/r/control.sock", SpillDir: "/r/spill", GateSocket: "/r/gate.sock",
		SecretFiles: []sandbox.SecretFile{{Name: "token"}},
	}
	args := append([]string{"--info-fd", "9"}, Args(plan, host, true)...)
	if _, ok := parseOps(args); !ok {
		t.Fatalf("an option of Args is not known to parseOps: %q", args)
	}
}
