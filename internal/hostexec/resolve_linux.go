package hostexec

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// Resolve finds name (an absolute path, or a word looked up in path, the PATH the
// program gets), checks it and its interpreters under pol, and returns it held open.
// Its error wraps [ErrUntrusted] (a [*Refusal]) when the program may not run, and
// os.ErrNotExist when it is not there.
func Resolve(name, path string, pol Policy) (*Program, error) {
	abs, err := LookPath(name, path)
	if err != nil {
		return nil, err
	}
	r := &resolver{name: name, path: path, untrusted: pol.canonical(), invoker: pol.Invoker}
	if r.invoker < 0 {
		r.invoker = os.Getuid()
	}
	p := &Program{Name: name}
	if err := r.chain(p, abs, name, 0); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

type resolver struct {
	name      string // the program as named, for errors
	path      string // the program's PATH, for #!/usr/bin/env X
	untrusted []string
	invoker   int
}

func (r *resolver) refuse(path, format string, args ...any) error {
	return &Refusal{Name: r.name, Path: path, Reason: fmt.Sprintf(format, args...)}
}

// chain appends the file at abs (named as named) and its interpreters to p.
func (r *resolver) chain(p *Program, abs, named string, depth int) error {
	if depth > MaxInterpreters {
		return r.refuse(abs, "is a #! script nested more than %d deep", MaxInterpreters)
	}
	f, canon, st, err := r.open(abs)
	if err != nil {
		return err
	}
	p.Chain = append(p.Chain, Step{Path: canon, Named: named, Owner: int(st.Uid), f: f})
	step := &p.Chain[len(p.Chain)-1]
	head := make([]byte, 256)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: reading %s: %w", r.name, canon, err)
	}
	head = head[:n]
	if !bytes.HasPrefix(head, []byte("#!")) {
		loader, err := r.loader(f, canon)
		step.Loader = loader
		return err
	}
	line, _, ok := bytes.Cut(head[2:], []byte("\n"))
	if !ok {
		return r.refuse(canon, "has a #! line longer than %d bytes", len(head))
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return r.refuse(canon, "has an empty #! line")
	}
	interp := fields[0]
	opt := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(line)), interp))
	if !filepath.IsAbs(interp) {
		return r.refuse(canon, "names a relative interpreter %q (it would be looked up in the working directory)", interp)
	}
	if filepath.Base(interp) == "env" {
		// #!/usr/bin/env X: env itself must be trustworthy, and X is what it would
		// find in PATH; X runs in its stead, through its checked descriptor.
		if opt == "" || strings.HasPrefix(opt, "-") || strings.ContainsAny(opt, " \t") {
			return r.refuse(canon, "has #!%s %s: only #!/usr/bin/env PROGRAM (one word, no options) is supported", interp, opt)
		}
		ef, _, _, err := r.open(interp)
		if err != nil {
			return err
		}
		ef.Close()
		x, err := LookPath(opt, r.path)
		if err != nil {
			return fmt.Errorf("%s: interpreter of %s: %w", r.name, canon, err)
		}
		step.env = true
		return r.chain(p, x, opt, depth+1)
	}
	step.opt = opt
	return r.chain(p, interp, interp, depth+1)
}

// loader checks an ELF program's PT_INTERP; a file that is not ELF is left to the
// kernel (which refuses what it cannot run).
func (r *resolver) loader(f *os.File, canon string) (string, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", nil
	}
	for _, prog := range ef.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, min(prog.Filesz, 4096))
		if _, err := prog.ReadAt(b, 0); err != nil {
			return "", r.refuse(canon, "has an unreadable ELF interpreter: %v", err)
		}
		path := string(bytes.TrimRight(b, "\x00"))
		if !filepath.IsAbs(path) {
			return "", r.refuse(canon, "names a relative ELF interpreter %q", path)
		}
		lf, lcanon, _, err := r.open(path)
		if err != nil {
			return "", err
		}
		lf.Close()
		return lcanon, nil
	}
	return "", nil
}

// open walks abs from / one name at a time, checking each directory and link on the
// way, and opens the file at the end; it returns the file, its resolved path and its
// status (from the descriptor). A link's target is spliced into what is left of the
// path and the walk starts again from /, at most maxLinks times.
func (r *resolver) open(abs string) (*os.File, string, linux.Stat, error) {
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(abs), "/"), "/")
	for links := 0; ; links++ {
		if links > maxLinks {
			return nil, "", linux.Stat{}, r.refuse(abs, "has more than %d symbolic links on its way", maxLinks)
		}
		f, canon, st, next, err := r.walk(rest)
		if next == nil {
			return f, canon, st, err
		}
		rest = next
	}
}

// walk is one pass of open over the names rest; next, when not nil, is the path to
// walk instead (a link was met).
func (r *resolver) walk(rest []string) (f *os.File, canon string, fst linux.Stat, next []string, err error) {
	dir, err := linux.OpenRootPath()
	if err != nil {
		return nil, "", linux.Stat{}, nil, err
	}
	defer func() { linux.CloseFD(dir) }()
	canon = "/"
	dst, err := linux.Fstat(dir)
	if err == nil {
		err = r.checkDir(canon, dst)
	}
	if err != nil {
		return nil, "", linux.Stat{}, nil, err
	}
	for i, c := range rest {
		if c == "" || c == "." {
			continue
		}
		here := filepath.Join(canon, c)
		if c == ".." { // only from a link's target: spell it out and start again
			return nil, "", linux.Stat{}, append(split(filepath.Dir(canon)), rest[i+1:]...), nil
		}
		st, err := linux.Lstatat(dir, c)
		if err != nil {
			return nil, "", linux.Stat{}, nil, r.notThere(here, err)
		}
		if err := r.checkEntry(here, dst, st); err != nil {
			return nil, "", linux.Stat{}, nil, err
		}
		last := i == len(rest)-1
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFLNK:
			target, err := linux.Readlinkat(dir, c)
			if err != nil {
				return nil, "", linux.Stat{}, nil, err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(canon, target)
			}
			return nil, "", linux.Stat{}, append(split(target), rest[i+1:]...), nil
		case syscall.S_IFDIR:
			if last {
				return nil, "", linux.Stat{}, nil, r.refuse(here, "is a directory")
			}
			fd, err := linux.OpenPathAt(dir, c)
			if err != nil {
				return nil, "", linux.Stat{}, nil, r.notThere(here, err)
			}
			linux.CloseFD(dir)
			dir = fd
			if dst, err = linux.Fstat(dir); err != nil {
				return nil, "", linux.Stat{}, nil, err
			}
			if dst.Ino != st.Ino || dst.Dev != st.Dev || dst.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				return nil, "", linux.Stat{}, nil, r.refuse(here, "changed while it was checked")
			}
			if err := r.checkDir(here, dst); err != nil {
				return nil, "", linux.Stat{}, nil, err
			}
			canon = here
		case syscall.S_IFREG:
			if !last {
				return nil, "", linux.Stat{}, nil, r.notThere(here, syscall.ENOTDIR)
			}
			f, fst, err := r.openFile(dir, c, here, st)
			return f, here, fst, nil, err
		default:
			return nil, "", linux.Stat{}, nil, r.refuse(here, "is not a regular file")
		}
	}
	return nil, "", linux.Stat{}, nil, r.refuse(canon, "is a directory")
}

// openFile opens the program file name of dir (at path here, whose lstat was st) and
// checks it through the descriptor.
func (r *resolver) openFile(dir int, name, here string, st linux.Stat) (*os.File, linux.Stat, error) {
	f, err := linux.OpenProgramAt(dir, name)
	if err != nil {
		return nil, linux.Stat{}, r.notThere(here, err)
	}
	fst, err := linux.Fstat(int(f.Fd()))
	if err == nil {
		err = r.checkFile(here, fst, st)
	}
	if err != nil {
		f.Close()
		return nil, linux.Stat{}, err
	}
	return f, fst, nil
}

// split is the names of the absolute path p.
func split(p string) []string {
	return strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
}

func (r *resolver) notThere(path string, err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s: %s: %w", r.name, path, os.ErrNotExist)
	}
	return fmt.Errorf("%s: %s: %w", r.name, path, err)
}

func (r *resolver) trusted(uid uint32) bool { return uid == 0 || int(uid) == r.invoker }

func (r *resolver) owner(uid uint32) string {
	if uid == 0 {
		return "root"
	}
	return fmt.Sprintf("uid %d", uid)
}

// inSandbox refuses path if it is or lies under an untrusted path: the workspace or a
// path the sandbox can write.
func (r *resolver) inSandbox(path string) error {
	for _, u := range r.untrusted {
		switch {
		case path == u:
			return r.refuse(path, "is the workspace or a path the sandbox can write")
		case within(path, u):
			return r.refuse(path, "lies in %s, the workspace or a path the sandbox can write", u)
		}
	}
	return nil
}

// checkDir checks a directory on the way: owned by root or the invoker, and not
// writable by group or others unless sticky (then checkEntry checks what is in it).
func (r *resolver) checkDir(path string, st linux.Stat) error {
	if err := r.inSandbox(path); err != nil {
		return err
	}
	if !r.trusted(st.Uid) {
		return r.refuse(path, "is a directory owned by %s, neither root nor the invoking user: its owner can replace what is in it", r.owner(st.Uid))
	}
	if st.Mode&0o022 != 0 && st.Mode&syscall.S_ISVTX == 0 {
		return r.refuse(path, "is a directory writable by group or others (mode %04o): they can replace what is in it", st.Mode&0o7777)
	}
	return nil
}

// checkEntry checks an entry of the directory whose status is parent: in a sticky
// directory others may write, it must be owned by root or the invoker (so only they
// can rename or remove it); and it must not lie where the sandbox can write.
func (r *resolver) checkEntry(path string, parent, st linux.Stat) error {
	if err := r.inSandbox(path); err != nil {
		return err
	}
	if parent.Mode&0o022 != 0 && !r.trusted(st.Uid) {
		return r.refuse(path, "is owned by %s in a directory others can write", r.owner(st.Uid))
	}
	return nil
}

// checkFile checks the program file through its descriptor (fst), and that it is the
// entry checked by name (st).
func (r *resolver) checkFile(path string, fst, st linux.Stat) error {
	switch {
	case fst.Ino != st.Ino || fst.Dev != st.Dev:
		return r.refuse(path, "changed while it was checked")
	case fst.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return r.refuse(path, "is not a regular file")
	case !r.trusted(fst.Uid):
		return r.refuse(path, "is owned by %s, neither root nor the invoking user", r.owner(fst.Uid))
	case fst.Mode&0o022 != 0:
		return r.refuse(path, "is writable by group or others (mode %04o)", fst.Mode&0o7777)
	}
	return nil
}
