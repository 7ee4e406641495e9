package admit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/cordonhq/cordon/contract"
)

// What a tenant's contract may name on the host. Every key of a contract that names a
// host path or a host program, and what [Check] admits of it:
//
//	workspace                      absent, or this session's workspace
//	filesystem.readable, writable, relative paths that stay in the workspace, also once
//	  widen[].path                 links are resolved ("@system" too: a preset,
//	                               compared with the base's mounts)
//	filesystem.deny_write,         paths and globs in the workspace, relative or absolute
//	  deny_read                    (a denied path that does not exist gets a placeholder
//	                               on the host, so it must be in the workspace)
//	credentials, provider exec     scope.mint and scope.revoke run on the host: only as
//	                               the base's credential of the same name has them
//	gates[].run                    runs on the host: only as the base's gate of that name
//
// A value written the same in the same key of the base is admitted: the operator
// named it. Absolute paths are refused in the grants even inside the workspace: the
// sandbox may later turn a directory there into a link, which the compiler follows
// for an absolute path but refuses for a relative one.
//
// Keys that name no host path: env.pass (host variables, compared as written: a new
// one is wider), monitor.exec (patterns of the sandbox's programs), image, pull,
// network, commands, limits. A contract has no audit key: the audit root is the
// server's (the tenant's audit root).

// execProvider is the credential provider whose scope names host programs
// (creds/command).
const execProvider = "exec"

// outside lists every host path or host program tc names outside the workspace
// (workspace as given, ws resolved), each a [*contract.Error] at its position in tc.
func outside(tc, base *contract.Contract, workspace, ws string) []error {
	var errs []error
	bad := func(p contract.Pos, format string, args ...any) {
		errs = append(errs, &contract.Error{File: tc.File, Pos: p, Msg: fmt.Sprintf(format, args...)})
	}
	if w := tc.Workspace; w.Value != "" && filepath.Clean(w.Value) != workspace && filepath.Clean(w.Value) != ws {
		bad(w.Pos, "workspace: %q is not this session's workspace; leave the key out (the server gives each session its own)", w.Value)
	}
	f, bf := tc.Filesystem, base.Filesystem
	for _, g := range []struct {
		key        string
		list, base []contract.Str
		deny       bool
	}{
		{"readable", f.Readable, bf.Readable, false},
		{"writable", f.Writable, bf.Writable, false},
		{"widen", widenPaths(f.Widen), widenPaths(bf.Widen), false},
		{"deny_write", f.DenyWrite, bf.DenyWrite, true},
		{"deny_read", f.DenyRead, bf.DenyRead, true},
	} {
		for _, s := range g.list {
			if restated(s, g.base) || (g.key == "readable" && s.Value == "@system") {
				continue
			}
			if why := pathOutside(s.Value, workspace, ws, g.deny); why != "" {
				bad(s.Pos, "filesystem.%s: %q %s", g.key, s.Value, why)
			}
		}
	}
	for _, cr := range tc.Credentials {
		if cr.Provider == execProvider && !sameExec(cr, base.Credentials) {
			bad(cr.Pos, "credentials %s: an exec credential runs scope.mint and scope.revoke on the host; "+
				"a tenant's contract may only restate its base contract's", cr.Name)
		}
	}
	for _, g := range tc.Gates {
		if !sameGate(g, base.Gates) {
			bad(g.Pos, "gates %s: a gate runs %q on the host; a tenant's contract may only restate its base contract's gates",
				g.Name.Value, values(g.Run))
		}
	}
	return errs
}

func widenPaths(ws []contract.Widening) []contract.Str {
	out := make([]contract.Str, len(ws))
	for i, w := range ws {
		out[i] = w.Path
	}
	return out
}

func restated(s contract.Str, base []contract.Str) bool {
	return slices.ContainsFunc(base, func(b contract.Str) bool { return b.Value == s.Value })
}

func values(ss []contract.Str) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Value
	}
	return out
}

func sameExec(cr contract.Credential, base []contract.Credential) bool {
	i := slices.IndexFunc(base, func(b contract.Credential) bool { return b.Name == cr.Name })
	if i < 0 || base[i].Provider != execProvider {
		return false
	}
	for _, k := range []string{"mint", "revoke"} {
		if !reflect.DeepEqual(cr.Scope[k], base[i].Scope[k]) {
			return false
		}
	}
	return true
}

func sameGate(g contract.GateSpec, base []contract.GateSpec) bool {
	return slices.ContainsFunc(base, func(b contract.GateSpec) bool {
		return b.Name.Value == g.Name.Value && slices.Equal(values(b.Run), values(g.Run))
	})
}

// pathOutside says why raw, a path of a filesystem key, is not provably in the
// workspace, or "". deny allows globs (their fixed prefix must be in the workspace)
// and absolute paths.
func pathOutside(raw, workspace, ws string, deny bool) string {
	if raw == "" {
		return "" // the compiler refuses it
	}
	if strings.HasPrefix(raw, "~") {
		return "names a home directory on the host, outside the workspace"
	}
	p := strings.TrimSuffix(raw, "/**")
	if deny {
		p = globPrefix(p)
	}
	switch {
	case filepath.IsAbs(p) && !deny:
		return "is an absolute path; a tenant's contract names paths relative to its workspace"
	case filepath.IsAbs(p):
		p = filepath.Clean(p)
		if within(p, workspace) && !within(p, ws) {
			p = filepath.Join(ws, strings.TrimPrefix(p, workspace))
		}
	default:
		p = filepath.Join(ws, p)
	}
	if !within(p, ws) {
		return "is outside the workspace"
	}
	r, ok := resolve(p)
	switch {
	case !ok:
		return "cannot be resolved in the workspace (a symbolic link that leads nowhere or loops)"
	case !within(r, ws):
		return "leads outside the workspace through a symbolic link"
	}
	return ""
}

// globPrefix is the part of a deny pattern before its first name holding a glob
// character: every match lies under it.
func globPrefix(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if strings.ContainsAny(part, `*?[]{}\`) {
			if i == 0 {
				return "."
			}
			return strings.Join(parts[:i], "/") + "/"
		}
	}
	return p
}

// resolve resolves the symbolic links in the longest existing prefix of p (clean,
// absolute). ok is false when a name that exists cannot be resolved: a link to
// nothing, which the sandbox could make lead anywhere, or a loop.
func resolve(p string) (string, bool) {
	var rest []string
	for q := p; ; q = filepath.Dir(q) {
		r, err := filepath.EvalSymlinks(q)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, true
		}
		if _, lerr := os.Lstat(q); lerr == nil || !errors.Is(err, fs.ErrNotExist) {
			return "", false
		}
		if q == "/" {
			return "", false
		}
		rest = append(rest, filepath.Base(q))
	}
}
