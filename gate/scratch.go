package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/hostexec"
	"github.com/cordonhq/cordon/internal/safefs"
)

// Bounds on the loose objects a push copies from the workspace, and on the entries
// of the pack directory.
const (
	maxLooseObjects = 200_000
	maxLooseBytes   = 512 << 20 // of host disk per request; MaxPending requests at most
	maxPackEntries  = 10_000
)

// makeScratch makes, in home, the bare repository a push runs from: no configuration,
// hooks, refs or remotes but cordon's, and the workspace's objects lent through
// objects/info/alternates to a private directory of cordon's. That directory holds a
// copy of the loose objects (read through a safefs.Dir, regular files only) and a link
// to the pack directory, which is read-only to the sandbox (all of .git by default,
// objects/pack under git: commit). It refuses what would lend another repository's
// objects: alternates of the workspace's own, or a pack entry that is not a regular
// file. format is the repository's object format ("" or "sha256").
func makeScratch(ctx context.Context, pol hostexec.Policy, home, ws, format string, env []string) (string, error) {
	objects := filepath.Join(ws, ".git", "objects")
	if st, err := os.Lstat(objects); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", objects)
	}
	root, err := safefs.OpenDir(ws, ".git/objects")
	if err != nil {
		return "", errRepo
	}
	defer root.Close()
	for _, f := range []string{"info/alternates", "info/http-alternates"} {
		if _, err := root.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("refused: %s exists (or a link on its way); it would lend another repository's objects to the push", filepath.Join(objects, f))
		}
	}
	alt := filepath.Join(home, "objects")
	if err := os.MkdirAll(alt, 0o700); err != nil {
		return "", err
	}
	if err := linkPacks(root, objects, alt); err != nil {
		return "", err
	}
	if err := copyLoose(root, alt); err != nil {
		return "", err
	}
	scratch := filepath.Join(home, "push.git")
	args := []string{"init", "-q", "--bare", "--template=", scratch}
	if format == "sha256" {
		args = append(args, "--object-format=sha256")
	}
	if _, err := git(ctx, pol, home, env, args...); err != nil {
		return "", errors.New("making the scratch repository failed")
	}
	info := filepath.Join(scratch, "objects", "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return "", err
	}
	return scratch, os.WriteFile(filepath.Join(info, "alternates"), []byte(alt+"\n"), 0o600)
}

// linkPacks checks that the workspace's pack directory holds regular files only and
// links alt/pack to it.
func linkPacks(root *safefs.Dir, objects, alt string) error {
	if _, err := packState(root); err != nil {
		return err
	}
	if _, err := root.Lstat("pack"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return os.Symlink(filepath.Join(objects, "pack"), filepath.Join(alt, "pack"))
}

// packState lists the workspace's packs (name, inode, size), refusing anything but
// regular files: the push reads them where they are, so the approval checks that they
// are the ones the request saw.
func packState(root *safefs.Dir) (string, error) {
	st, err := root.Lstat("pack")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil || !st.IsDir() {
		return "", errors.New("refused: objects/pack is not a directory")
	}
	names, err := root.Names("pack", maxPackEntries+1)
	if err != nil {
		return "", errRepo
	}
	if len(names) > maxPackEntries {
		return "", fmt.Errorf("refused: objects/pack holds more than %d entries; run git gc outside the sandbox first", maxPackEntries)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		fi, err := root.Lstat("pack/" + name)
		if err != nil || !fi.Mode().IsRegular() {
			return "", fmt.Errorf("refused: objects/pack/%s is not a regular file; it could lend another repository's objects to the push", name)
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = uint64(st.Ino)
		}
		fmt.Fprintf(&b, "%s %d %d %d\n", name, ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String(), nil
}

// packsOf is packState for the workspace ws.
func packsOf(ws string) (string, error) {
	root, err := safefs.OpenDir(ws, ".git/objects")
	if err != nil {
		return "", errRepo
	}
	defer root.Close()
	return packState(root)
}

// copyRegular copies the regular file name in root to dst, streaming, at most max
// bytes; it returns the size.
func copyRegular(root *safefs.Dir, name, dst string, max int64) (int64, error) {
	f, err := root.Open(name, safefs.NoLimit)
	if err != nil {
		return 0, errRepo
	}
	defer f.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(f, max+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, errRepo
	}
	return n, nil
}

// copyLoose copies the loose objects (objects/XX/YYYY…) into alt.
func copyLoose(root *safefs.Dir, alt string) error {
	dirs, err := root.Names(".", maxLooseObjects)
	if err != nil || len(dirs) >= maxLooseObjects {
		return errRepo
	}
	slices.Sort(dirs)
	var n, total int64
	for _, d := range dirs {
		if len(d) != 2 || strings.Trim(d, "0123456789abcdef") != "" {
			continue
		}
		if fi, err := root.Lstat(d); err != nil || !fi.IsDir() {
			return fmt.Errorf("refused: objects/%s is not a directory", d)
		}
		files, err := root.Names(d, maxLooseObjects+1)
		if err != nil {
			return errRepo
		}
		if int64(len(files)) > maxLooseObjects-n {
			return fmt.Errorf("refused: more than %d loose objects; run git gc outside the sandbox first", maxLooseObjects)
		}
		slices.Sort(files)
		dst := filepath.Join(alt, d)
		if err := os.MkdirAll(dst, 0o700); err != nil {
			return err
		}
		for _, f := range files {
			if strings.HasPrefix(f, "tmp_") {
				continue // an object git is still writing
			}
			if fi, err := root.Lstat(d + "/" + f); err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("refused: objects/%s/%s is not a regular file; it could lend another repository's objects to the push", d, f)
			}
			size, err := copyRegular(root, d+"/"+f, filepath.Join(dst, f), maxLooseBytes-total)
			if err != nil {
				return err
			}
			if n, total = n+1, total+size; n > maxLooseObjects || total > maxLooseBytes {
				return fmt.Errorf("refused: more than %d loose objects or %d bytes of them; run git gc outside the sandbox first", maxLooseObjects, int64(maxLooseBytes))
			}
		}
	}
	return nil
}
