package sandboxinit

import (
	"fmt"
	"github.com/cordonhq/cordon/internal/paths"
	"io"
	"os"
	"path/filepath"
)

// InstallMain is `internal install DEST`: it copies this binary to DEST (which must not
// exist; mode 0555). The kubernetes placement runs it in an init container from
// cordon's own image, so that process 1 of a Pod is cordon's binary whatever the
// workload's image holds, as the local backends mount it read-only into every sandbox.
func InstallMain(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintln(os.Stderr, "usage: cordon internal install /ABSOLUTE/DEST")
		return 2
	}
	if err := install(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal install: %v\n", err)
		return 1
	}
	return 0
}

// install copies this binary to dest, and makes the credential files' mount point
// beside it (the Pod mounts a memory volume there, over this read-only volume, where
// process 1 writes them: paths.SandboxSecrets).
func install(dest string) error {
	secrets := filepath.Join(filepath.Dir(dest), filepath.Base(paths.SandboxSecrets))
	if err := os.Mkdir(secrets, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", secrets, err)
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
