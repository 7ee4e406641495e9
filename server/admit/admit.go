// Package admit decides whether the server runs a tenant's contract: only when it is
// no wider than the tenant's base contract, as `cordon diff` classifies a change, and
// names no host path outside the session's workspace (docs/serve.md, "Base contracts").
//
// A [Base] is read once, when the config is loaded; [Check] then compiles the base and
// the tenant's contract for one workspace, compares them with [contract.Compare] and
// refuses with every widening and every host path listed, each at its position in the
// tenant's contract. Check is safe for concurrent use: it never changes the Base.
package admit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordonhq/cordon/contract"
)

// The names contracts carry in positions: a tenant's contract comes in a request and
// has no file; the base's host path is the operator's business, not the tenant's.
const (
	RequestFile = "request:contract"
	BaseFile    = "base:contract"
)

// MaxContract is the largest tenant contract Check reads.
const MaxContract = 1 << 20

// Errors returned by [Check] and [ParseBase], tested with errors.Is.
var (
	// ErrInvalid: the tenant's contract does not decode or compile; the message lists
	// every problem as FILE:LINE:COL: message.
	ErrInvalid = errors.New("invalid contract")
	// ErrRefused: the tenant's contract is wider than its base or names a host path
	// outside its workspace; the error is a [*RefusedError].
	ErrRefused = errors.New("contract refused")
)

// Base is a tenant's base contract: the most any contract of the tenant may allow.
// Its zero value is not usable; make one with [ParseBase] or [Default].
type Base struct {
	c *contract.Contract // never changed after ParseBase: Check works on a copy
}

// Default is the base of a tenant whose config names none: the built-in default
// contract, the one `cordon run` uses without -c (the workspace writable but .git,
// @system readable, no network, no credentials, no gates).
func Default() *Base { return &Base{c: contract.Default()} }

// YAML is the base as a contract to run when a tenant sends none: the base file's
// bytes, or "version: 1\n" (the built-in default) for [Default]. Check admits it.
func (b *Base) YAML() []byte {
	if b.c.Source == nil {
		return []byte("version: 1\n")
	}
	return slices.Clone(b.c.Source)
}

// ParseBase decodes the base contract read from file and checks that it compiles, for
// a workspace holding the directories its readable and writable lists name in it
// (every session's workspace must hold them too: a path that does not exist does not
// compile). Every problem is returned, joined,
// each a [*contract.Error] at FILE:LINE:COL in file.
func ParseBase(file string, data []byte) (*Base, error) {
	c, err := contract.Parse(file, data)
	if err != nil {
		return nil, err
	}
	if w := c.Workspace; w.Value != "" && w.Value != "." {
		return nil, &contract.Error{File: file, Pos: w.Pos, Msg: "workspace: a base contract names no workspace: the server gives each session its own"}
	}
	ws, err := scratch(c)
	if err != nil {
		return nil, fmt.Errorf("compiling the base contract: %w", err)
	}
	defer os.RemoveAll(ws)
	cp := *c
	cp.ForWorkspace(ws)
	if _, err := contract.Compile(&cp, host(ws)); err != nil {
		return nil, err
	}
	return &Base{c: c}, nil
}

// scratch makes an empty workspace to compile c for, with a directory for each
// relative path its readable and writable lists name inside it.
func scratch(c *contract.Contract) (string, error) {
	ws, err := os.MkdirTemp("", "cordon-base-")
	if err != nil {
		return "", err
	}
	if ws, err = filepath.EvalSymlinks(ws); err != nil {
		return "", err
	}
	for _, s := range append(slices.Clone(c.Filesystem.Readable), c.Filesystem.Writable...) {
		p := filepath.Join(ws, strings.TrimSuffix(s.Value, "/**"))
		if s.Value == "" || filepath.IsAbs(s.Value) || strings.HasPrefix(s.Value, "~") || s.Value == "@system" || !within(p, ws) {
			continue
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			os.RemoveAll(ws)
			return "", err
		}
	}
	return ws, nil
}

// host is the machine as a session's supervisor will see it: the server's home, the
// workspace as the working directory, and none of the server's environment (env.pass
// is compared as written).
func host(ws string) contract.Host {
	home, _ := os.UserHomeDir()
	return contract.Host{Home: home, Cwd: ws, Root: "/"}
}

// RefusedError is a tenant contract refused: every widening over the base and every
// host path outside the workspace. It matches [ErrRefused].
type RefusedError struct {
	Widenings []contract.Change // each Wider, as `cordon diff` prints it
	Outside   []error           // each a [*contract.Error] in the tenant's contract
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString("the contract is refused: ")
	switch {
	case len(e.Widenings) > 0 && len(e.Outside) > 0:
		fmt.Fprintf(&b, "%s over the tenant's base contract, %s outside the workspace", count(len(e.Widenings), "widening"), count(len(e.Outside), "host path"))
	case len(e.Widenings) > 0:
		fmt.Fprintf(&b, "%s over the tenant's base contract; a tenant's contract may only narrow it", count(len(e.Widenings), "widening"))
	default:
		fmt.Fprintf(&b, "it names %s outside the workspace", count(len(e.Outside), "host path"))
	}
	for _, w := range e.Widenings {
		b.WriteString("\n" + w.String())
	}
	for _, o := range e.Outside {
		b.WriteString("\n" + o.Error())
	}
	return b.String()
}

// Is makes a RefusedError match ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Check admits tenantYAML, a tenant's contract, for a session in workspace, a
// directory the server made under workspacesRoot (the tenant's config.Tenant.Workspaces).
// It returns the tenant's contract compiled for that workspace, or:
//   - an error matching [ErrInvalid] when the contract does not decode (strictly: an
//     unknown key, an alias, a second document) or compile, each problem at
//     request:contract:LINE:COL;
//   - a [*RefusedError] (matching [ErrRefused]) when it names a host path outside
//     the workspace or is wider than base in any way `cordon diff` reports;
//   - another error when base is nil or the workspace is not a directory under
//     workspacesRoot: the server's mistake, not the tenant's.
//
// A contract naming a host path outside the workspace is not compiled, so the tenant
// learns nothing about what exists on the host.
func Check(base *Base, tenantYAML []byte, workspace, workspacesRoot string) (*contract.Compiled, error) {
	return CheckFile(base, RequestFile, tenantYAML, workspace, workspacesRoot)
}

// CheckFile is [Check] of a contract read from file, which its problems name: the
// server's config admits a pool's contract file this way when it is loaded.
func CheckFile(base *Base, file string, tenantYAML []byte, workspace, workspacesRoot string) (*contract.Compiled, error) {
	if base == nil || base.c == nil {
		return nil, errors.New("admitting a contract: the tenant has no base contract loaded")
	}
	ws, err := checkWorkspace(workspace, workspacesRoot)
	if err != nil {
		return nil, fmt.Errorf("admitting a contract: %w", err)
	}
	if len(tenantYAML) > MaxContract {
		return nil, fmt.Errorf("%w: %d bytes; at most %d", ErrInvalid, len(tenantYAML), MaxContract)
	}
	tc, err := contract.Parse(file, tenantYAML)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if out := outside(tc, base.c, workspace, ws); len(out) > 0 {
		return nil, &RefusedError{Outside: out}
	}
	bc := *base.c
	bc.File = BaseFile
	bc.ForWorkspace(ws)
	bp, err := contract.Compile(&bc, host(ws))
	if err != nil {
		return nil, fmt.Errorf("the tenant's base contract does not compile for this workspace: %w", err)
	}
	tc.ForWorkspace(ws)
	tp, err := contract.Compile(tc, host(ws))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	after := contract.Compiled{Contract: tc, Plan: tp}
	var wider []contract.Change
	for _, c := range contract.Compare(contract.Compiled{Contract: &bc, Plan: bp}, after) {
		if c.Wider {
			wider = append(wider, c)
		}
	}
	if len(wider) > 0 {
		return nil, &RefusedError{Widenings: wider}
	}
	return &after, nil
}

// checkWorkspace returns workspace with its links resolved when it is an existing
// directory strictly below root (both absolute and clean), also once resolved.
func checkWorkspace(workspace, root string) (string, error) {
	if !filepath.IsAbs(workspace) || filepath.Clean(workspace) != workspace ||
		!filepath.IsAbs(root) || filepath.Clean(root) != root {
		return "", fmt.Errorf("workspace %q and root %q must be clean absolute paths", workspace, root)
	}
	if workspace == root || !within(workspace, root) {
		return "", fmt.Errorf("workspace %s is not below the tenant's workspaces %s", workspace, root)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", err
	}
	if ws == realRoot || !within(ws, realRoot) {
		return "", fmt.Errorf("workspace %s resolves to %s, not below the tenant's workspaces %s", workspace, ws, realRoot)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return "", fmt.Errorf("workspace %s is not a directory", workspace)
	}
	return ws, nil
}

// within reports whether p is dir or inside it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
