package sandboxinit

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
)

// InstallMain is `internal install DEST`: it copies this binary to DEST (which must not
// exist; mode 0555). The kubernetes placement runs it in an init container from
// cordon's own image, so that process 1 of a Pod is cordon's binary whatever the
// workload's image holds, as the local backends mount it read-only into every sandbox.
//
// With `--pin DIR REL...` it then makes each REL, an empty file, in the workspace
// volume mounted at DIR: the files the sandbox container's subPath mounts bind
// (podspec.PinnedFiles), which must exist before it starts.
func InstallMain(args []string) int {
	if len(args) < 1 || !filepath.IsAbs(args[0]) || len(args) > 1 && (len(args) < 3 || args[1] != "--pin" || !filepath.IsAbs(args[2])) {
		fmt.Fprintln(os.Stderr, "usage: cordon internal install /ABSOLUTE/DEST [--pin /ABSOLUTE/DIR REL...]")
		return 2
	}
	if err := install(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal install: %v\n", err)
		return 1
	}
	if len(args) > 1 {
		if err := pin(args[2], args[3:]); err != nil {
			fmt.Fprintf(os.Stderr, "cordon: internal install: %v\n", err)
			return 1
		}
	}
	return 0
}

// pin makes each of rels an empty file (0644) in dir, with the directories above it
// (0755), never through a link; one that exists is left as it is.
func pin(dir string, rels []string) error {
	t, err := linux.OpenTree(dir)
	if err != nil {
		return err
	}
	defer t.Close()
	for _, rel := range rels {
		if rel != path.Clean(rel) || path.IsAbs(rel) || rel == "." || strings.HasPrefix(rel, "../") || rel == ".." {
			return fmt.Errorf("pinning %q: not a clean path below %s", rel, dir)
		}
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			if err := t.Mkdir(strings.Join(parts[:i], "/"), 0o755, -1, -1); err != nil {
				return fmt.Errorf("pinning %q: %w", rel, err)
			}
		}
		if _, err := t.Lstat(rel); err == nil {
			continue
		}
		if err := t.WriteFile(rel, strings.NewReader(""), 0o644, -1, -1); err != nil {
			return fmt.Errorf("pinning %q: %w", rel, err)
		}
	}
	return nil
}

// install copies this binary to dest, and makes beside it what the Pod mounts and
// links there: the credential files' mount point (the Pod mounts a memory volume
// there, over this read-only volume, where process 1 writes them:
// paths.SandboxSecrets); the gate volume's mount point (paths.PodGateDir), where
// process 1 listens on the gate socket in a session with gates, with the link
// commands ask on (paths.SandboxGate) pointing to it; and the directory on the gate
// sessions' PATH (paths.SandboxGateBin) with a link `cordon` to this binary. The links
// are in this read-only volume: no command can replace them.
func install(dest string) error {
	dir := filepath.Dir(dest)
	for _, d := range []string{paths.SandboxSecrets, paths.PodGateDir} {
		mp := filepath.Join(dir, filepath.Base(d))
		if err := os.Mkdir(mp, 0o700); err != nil {
			return fmt.Errorf("making %s: %w", mp, err)
		}
	}
	bin := filepath.Join(dir, filepath.Base(paths.SandboxGateBin))
	if err := os.Mkdir(bin, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", bin, err)
	}
	for link, target := range map[string]string{
		filepath.Join(dir, filepath.Base(paths.SandboxGate)): filepath.Base(paths.PodGateDir) + "/" + filepath.Base(paths.PodGate),
		filepath.Join(bin, "cordon"):                         "../" + filepath.Base(dest),
	} {
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("linking %s: %w", link, err)
		}
	}
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("opening this binary: %w", err)
	}
	defer src.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return fmt.Errorf("copying to %s: %w", dest, err)
	}
	return out.Close()
}
