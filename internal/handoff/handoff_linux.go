package handoff

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/trace"
)

// Start starts cmd (bwrap, its sources already Root/<index>) as sp.UID:sp.GID from a
// private mount namespace in which every source is handed over. The namespace belongs to
// one OS thread of the caller, made for the purpose: the thread clones the sources,
// leaves the host's mount namespace (unshare, every mount made private before
// anything is mounted), mounts Root and the clones, joins sp.Netns when set, and
// forks cmd, which keeps those namespaces. Nothing is mounted in the caller's
// namespace; nothing is left when the sandbox ends. cmd.SysProcAttr must be set; Start adds the credentials.
//
// The thread is cmd's parent, and a parent-death signal (bwrap's --die-with-parent,
// cmd's Pdeathsig) fires when the parent thread ends, not the process: it stays,
// parked, until release is called, after cmd has been waited for.
func Start(sp *Spec, cmd *exec.Cmd) (release func(), err error) {
	return StartLive(sp, cmd, nil)
}

// StartLive is [Start] that, for a source handed over as an overlay, hands keep a
// duplicate of the overlay's mount (the workspace as the sandbox sees and writes it)
// before cmd starts, for cordon to read and write through while the sandbox runs.
// keep owns it (the overlay lives until it is closed); with keep nil it is not made.
func StartLive(sp *Spec, cmd *exec.Cmd, keep func(*os.File)) (release func(), err error) {
	if os.Geteuid() != 0 || sp.UID == 0 {
		return nil, errors.New("hand-off: cordon hands over as root, to another uid")
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(sp.UID), Gid: uint32(sp.GID), Groups: []uint32{}}
	started := make(chan error, 1)
	end := make(chan struct{})
	go func() {
		_ = linux.OnOwnThread(func() error {
			err := handAndStart(sp, cmd, keep)
			started <- err
			if err == nil {
				<-end
			}
			return nil
		})
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { close(end) }) }, nil
}

// handAndStart hands over sp's sources and starts cmd, handing keep the overlay's
// mount first (see StartLive).
func handAndStart(sp *Spec, cmd *exec.Cmd, keep func(*os.File)) error {
	sp0 := trace.Begin("handoff.clone")
	trees, live, err := cloneAll(sp, keep != nil)
	sp0.End()
	defer func() {
		for _, t := range trees {
			if t != nil {
				t.Close()
			}
		}
	}()
	if err != nil {
		if live != nil {
			live.Close()
		}
		return err
	}
	if live != nil {
		keep(live) // its owner now, whatever happens next
	}
	// Its own span, ended before the fork: bwrap.fork is not part of it.
	mount := trace.Begin("handoff.mount")
	err = mountAll(sp, trees)
	mount.End()
	if err != nil {
		return err
	}
	if sp.Netns != nil {
		ns, err := sp.Netns.file()
		if err == nil {
			err = linux.JoinNetns(ns)
		}
		if err != nil {
			return fmt.Errorf("hand-off: the sandbox's network namespace: %w", err)
		}
	}
	defer trace.Begin("bwrap.fork").End()
	return startIn(sp.JoinCgroups, cmd)
}

// mountAll moves the calling thread into a mount namespace of its own (see Start) and
// mounts Root there with sp's handed-over trees (trees, cloned beforehand) in it.
func mountAll(sp *Spec, trees []*os.File) error {
	if err := linux.PrivateMountNamespace(); err != nil {
		return err
	}
	if err := os.MkdirAll(Root, 0o700); err != nil {
		return err
	}
	if err := linux.MountTmpfs(Root); err != nil {
		return err
	}
	for i, t := range trees {
		if sp.Sources[i].Inside != nil {
			continue // mounted in its tree, below
		}
		target := filepath.Join(Root, strconv.Itoa(i))
		var err error
		if sp.Sources[i].Dir {
			err = os.Mkdir(target, 0o755)
		} else {
			err = os.WriteFile(target, nil, 0o644)
		}
		if err == nil {
			err = linux.AttachTree(t, target)
		}
		if err != nil {
			return err
		}
	}
	// In order: a tree placed inside another placed one goes in once that one is.
	for i, s := range sp.Sources {
		if s.Inside == nil {
			continue
		}
		if err := place(sp.Sources, trees, i); err != nil {
			return fmt.Errorf("hand-off: %w", err)
		}
	}
	return nil
}

// startIn starts cmd from the calling thread after the thread has joined what join
// joins, and takes the thread back out (see Spec.JoinCgroups).
func startIn(join func() (func() error, error), cmd *exec.Cmd) error {
	if join == nil {
		return cmd.Start()
	}
	leave, err := join()
	if err != nil {
		return cmd.Start() // where the thread is; the caller moves cmd
	}
	err = cmd.Start()
	if lerr := leave(); lerr != nil {
		if err == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return errors.Join(err, fmt.Errorf("hand-off: leaving the sandbox's cgroups: %w", lerr))
	}
	return err
}

// place mounts source i's tree read-only at its place inside an earlier source's tree
// (Source.Inside).
func place(srcs []Source, trees []*os.File, i int) error {
	in := srcs[i].Inside
	if in.Source < 0 || in.Source >= i || !filepath.IsLocal(in.Rel) || in.Rel == "." {
		return fmt.Errorf("source %d: no place %d/%q before it", i, in.Source, in.Rel)
	}
	same := filepath.Join(srcs[in.Source].Path, in.Rel) == srcs[i].Path
	return linux.AttachBeneath(trees[i], trees[in.Source], in.Rel, same)
}

// cloneAll clones every source before anything is mounted over Root, where the run
// directory's own sources live.
func cloneAll(sp *Spec, wantLive bool) (trees []*os.File, live *os.File, err error) {
	srcs := sp.Sources
	trees = make([]*os.File, len(srcs))
	userns := map[Owner]*os.File{}
	defer func() {
		for _, f := range userns {
			f.Close()
		}
	}()
	for i, s := range srcs {
		var ns *os.File
		if s.Idmap != nil && s.In < 0 {
			if ns = userns[*s.Idmap]; ns == nil && sp.prepared(*s.Idmap) != nil {
				// Made beforehand: it stays the Spec's.
				if ns, err = sp.prepared(*s.Idmap).file(); err != nil {
					return trees, live, err
				}
			}
			if ns == nil {
				f, err := linux.IdmapUserns(s.Idmap.UID, sp.UID, s.Idmap.GID, sp.GID)
				if err != nil {
					return trees, live, err
				}
				userns[*s.Idmap], ns = f, f
			}
		}
		if s.Sysctls {
			trees[i], err = linux.NewSysctlTree()
		} else if s.In >= 0 && s.In < i {
			rel, rerr := filepath.Rel(srcs[s.In].Path, s.Path)
			if rerr != nil {
				return trees, live, rerr
			}
			trees[i], err = linux.CloneTree(trees[s.In], rel, nil)
		} else {
			trees[i], err = linux.CloneTree(nil, s.Path, ns)
			if errors.Is(err, linux.ErrNoIdmap) && !s.Writable {
				trees[i], err = linux.CloneTree(nil, s.Path, nil)
			}
			if err == nil && s.Overlay != nil {
				if trees[i], err = overlay(trees[i], s.Overlay); err == nil && wantLive && live == nil {
					live, err = linux.DupFile(trees[i])
				}
			}
		}
		if err != nil {
			return trees, live, fmt.Errorf("hand-off: %w", err)
		}
	}
	return trees, live, nil
}

// overlay returns a detached overlay of lower (which it closes) with o's upper and
// work directories.
func overlay(lower *os.File, o *Overlay) (*os.File, error) {
	defer lower.Close()
	upper, err := linux.OpenDirNoLinks(o.Upper)
	if err != nil {
		return nil, err
	}
	defer upper.Close()
	work, err := linux.OpenDirNoLinks(o.Work)
	if err != nil {
		return nil, err
	}
	defer work.Close()
	return linux.NewOverlay(lower, upper, work)
}
