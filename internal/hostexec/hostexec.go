// Package hostexec is the one way cordon runs a program on the host because a
// contract names it: a credential provider's mint and revoke commands, a gate's
// program, and git for a git gate. Such a program runs outside the sandbox, often as
// root and with a credential, so it must be code the sandbox can never have written,
// in this run or an earlier one.
//
// [Resolve] finds the program (in the PATH it will get, by cordon, not a shell),
// walks its path from / one name at a time without following a link on its own, and
// checks every step:
//
//   - each directory is owned by root or the invoking user and is not writable by
//     group or others, unless it is sticky (like /tmp) and the entry in it is owned
//     by root or the invoking user (so no one else can rename or replace it);
//   - each symbolic link followed lies in such a directory (and is owned by root or
//     the invoker when that directory is sticky);
//   - the file is a regular file owned by root or the invoking user and not writable
//     by group or others;
//   - no step lies in the workspace or in a path the sandbox may write;
//   - a script's #! interpreter passes the same checks (up to [MaxInterpreters]
//     deep); for #!/usr/bin/env X, X is resolved in the program's PATH and checked,
//     and runs in env's stead;
//   - an ELF program's loader (PT_INTERP) passes the same checks.
//
// The file and every interpreter stay open on the descriptors that were checked.
// [Program.Command] runs the innermost interpreter (or the program itself) as
// /proc/self/fd/N of the child, and hands each script to its interpreter as
// /dev/fd/N: the kernel never looks a checked name up again, so nothing swapped in
// after the check runs. (The ELF loader is looked up by name by the kernel; its
// directories are checked as above, so only root or the invoker could swap it.)
package hostexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxInterpreters bounds a chain of #! scripts (Linux allows 4 levels).
const MaxInterpreters = 4

// maxLinks bounds the symbolic links followed while resolving one path (as the
// kernel's ELOOP limit does).
const maxLinks = 40

// ErrUntrusted is what every refusal of a program wraps.
var ErrUntrusted = errors.New("not a program the host may run")

// Policy says where a host program may not lie and whom it may belong to.
type Policy struct {
	// Untrusted are host paths the sandbox can write or that belong to the
	// workspace: the workspace and every read-write bind of the plan. A program, an
	// interpreter or a link followed on the way to them under one of these is refused.
	Untrusted []string
	// Invoker is the uid trusted besides root (the user running cordon); a negative
	// value means os.Getuid().
	Invoker int
}

// Step is one file of a program's chain: the program named, then each interpreter.
type Step struct {
	// Path is the file's resolved path (no symbolic links).
	Path string `json:"path"`
	// Named is how it was named: the contract's word or the #! line's.
	Named string `json:"named"`
	// Owner is the uid owning the file.
	Owner int `json:"owner"`
	// Loader is the ELF program's PT_INTERP, resolved, when it has one.
	Loader string `json:"loader,omitempty"`
	// opt is the one optional argument of the #! line that named this step's
	// interpreter (the next step); env says it came through /usr/bin/env.
	opt string
	env bool
	f   *os.File
}

// Program is a resolved, checked program, held open. Close it when done.
type Program struct {
	// Name is the program as the contract names it.
	Name string
	// Chain is the program then its interpreters, innermost last.
	Chain []Step
}

// Path is the program's resolved path.
func (p *Program) Path() string { return p.Chain[0].Path }

// Why says, for a person, why the program may run.
func (p *Program) Why() string {
	var owners []string
	for _, s := range p.Chain {
		w := "root"
		if s.Owner != 0 {
			w = "uid " + strconv.Itoa(s.Owner) + " (the invoking user)"
		}
		if !strings.Contains(strings.Join(owners, ","), w) {
			owners = append(owners, w)
		}
	}
	return "owned by " + strings.Join(owners, " and ") + ", not writable by group or others, " +
		"in directories only they can write, outside the workspace and every path the sandbox can write"
}

// Interpreters lists the chain after the program, as "path" or "path (via env)".
func (p *Program) Interpreters() []string {
	var out []string
	for i, s := range p.Chain[1:] {
		w := s.Path
		if p.Chain[i].env {
			w += " (via /usr/bin/env)"
		}
		out = append(out, w)
	}
	return out
}

// Close closes the descriptors held.
func (p *Program) Close() error {
	var errs []error
	for _, s := range p.Chain {
		if s.f != nil {
			errs = append(errs, s.f.Close())
		}
	}
	return errors.Join(errs...)
}

// Command returns a command running the checked program with args (argv[1:]),
// through the descriptors checked: the innermost interpreter is executed as
// /proc/self/fd/N and each script is handed to its interpreter as /dev/fd/N (a
// script sees that as its $0). Its Dir is "/", not the caller's directory (often the
// workspace), and its Env is env; set other fields before starting it. The program
// must stay open until the command has started.
func (p *Program) Command(ctx context.Context, args []string, env []string) *exec.Cmd {
	n := len(p.Chain) - 1
	cmd := exec.CommandContext(ctx, p.Chain[n].Path)
	files := make([]*os.File, 0, len(p.Chain))
	for _, s := range p.Chain {
		files = append(files, s.f)
	}
	cmd.ExtraFiles = files // child fd 3+i is Chain[i]
	cmd.Path = "/proc/self/fd/" + strconv.Itoa(3+n)
	argv := []string{p.Chain[n].Named}
	if n == 0 {
		argv[0] = p.Name
	}
	for i := n - 1; i >= 0; i-- {
		if p.Chain[i].opt != "" {
			argv = append(argv, p.Chain[i].opt)
		}
		argv = append(argv, "/dev/fd/"+strconv.Itoa(3+i))
	}
	cmd.Args = append(argv, args...)
	cmd.Env = env
	cmd.Dir = "/"
	return cmd
}

// Refusal is a program refused: what was named, the file at fault and why.
type Refusal struct {
	Name   string // the program as named
	Path   string // the file or directory at fault
	Reason string
}

func (r *Refusal) Error() string {
	if r.Path == "" || r.Path == r.Name {
		return fmt.Sprintf("%s: %s: %s", r.Name, ErrUntrusted, r.Reason)
	}
	return fmt.Sprintf("%s: %s: %s %s", r.Name, ErrUntrusted, r.Path, r.Reason)
}

// Is makes a Refusal match [ErrUntrusted].
func (r *Refusal) Is(target error) bool { return target == ErrUntrusted }

// LookPath finds name in the colon-separated list path the way execvp would, but
// only in absolute directories: a name with a slash is returned as it is (it must
// be absolute), and a relative PATH entry is skipped (it would be looked up in the
// program's working directory). It returns os.ErrNotExist when nothing is found.
func LookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", &Refusal{Name: name, Reason: "is a relative path (it would be looked up in the working directory, often the workspace)"}
		}
		return filepath.Clean(name), nil
	}
	if name == "" || name == "." || name == ".." {
		return "", fmt.Errorf("%q: %w", name, os.ErrNotExist)
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		c := filepath.Join(d, name)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %s: %w", name, path, os.ErrNotExist)
}

// within reports whether path is root or lies under it.
func within(path, root string) bool {
	if root == "/" {
		return true
	}
	return path == root || strings.HasPrefix(path, root+"/")
}

// canonical returns the policy's untrusted paths with their links resolved (as the
// sandbox's binds are), keeping both spellings.
func (pol Policy) canonical() []string {
	var out []string
	for _, u := range pol.Untrusted {
		if u == "" || !filepath.IsAbs(u) {
			continue
		}
		u = filepath.Clean(u)
		out = append(out, u)
		if r, err := filepath.EvalSymlinks(u); err == nil && r != u {
			out = append(out, r)
		}
	}
	return out
}

// PolicyOf is the policy for programs the sandbox must not have written: untrusted
// are the host paths it can write (contract.Plan.HostWritable); root and the
// invoking user are trusted.
func PolicyOf(untrusted []string) Policy {
	return Policy{Untrusted: untrusted, Invoker: -1}
}

// SafePath is path (a PATH value) without the entries a program must not look
// programs up in: relative ones (its working directory's) and those in an untrusted
// path. What the program runs itself is not checked as it is; this keeps the obvious
// way of running the sandbox's files out of its reach.
func (pol Policy) SafePath(path string) string {
	untrusted := pol.canonical()
	var keep []string
next:
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		r, err := filepath.EvalSymlinks(d)
		if err != nil {
			r = d
		}
		for _, u := range untrusted {
			if within(d, u) || within(r, u) {
				continue next
			}
		}
		keep = append(keep, d)
	}
	return strings.Join(keep, ":")
}
