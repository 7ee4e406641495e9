//go:build !linux

package runner

// maxSocketPath is the longest path a unix socket can be bound at: sun_path is 104
// bytes on macOS and the BSDs, with its terminating NUL. The default run root under
// macOS's $TMPDIR (/var/folders/…/T/) leaves little room: CORDON_RUN_ROOT shortens it.
const maxSocketPath = 103
