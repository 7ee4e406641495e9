// Package paths names where cordon keeps its host-side state, for the packages that
// must agree on it without importing each other (the runner, the session supervisor and
// client, the gates, gc). Every such path is named by a method of [Root].
package paths

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RunRootEnv names the variable that, when set, is the run root instead of the default:
// side-by-side installations and tests keep their runs, sessions, gate sockets and gc
// apart with it. It must be an absolute path, owned by the user, writable by no one else,
// and out of every sandbox's reach: a run refuses one inside what its sandbox may write.
const RunRootEnv = "CORDON_RUN_ROOT"

// GitWritten is the file cordon creates in a workspace's .git before a sandbox that may
// write that .git (filesystem.git: commit) starts, and keeps read-only inside it: from
// then on the index is the sandbox's to forge, and the diff baseline no longer takes
// any file's content from it. It is never removed by cordon.
const GitWritten = "cordon-sandbox-wrote-this-index"

// GitWrittenContent is what that file says to the person who finds it.
const GitWrittenContent = "cordon: a sandbox could write this repository's index and objects (filesystem.git: commit).\n" +
	"cordon's diffs no longer trust the index here and read every file instead. Remove this file\n" +
	"only after you have checked the index against the files (e.g. rm .git/index && git reset).\n"

// Root is a run root: the private directory that holds the state of the runs live on
// this host. Its layout:
//
//	ROOT/ID/               a run's private directory (owner.json, sockets, masks)
//	ROOT/sessions/ID.sock  a session supervisor's socket, ID.json its record, ID.log its log
//	ROOT/gates/ID.sock     a run's gate admin socket
type Root string

// RunRoot is the run root of this process's environment: $CORDON_RUN_ROOT when set,
// /run/cordon/runs for root, else under $XDG_RUNTIME_DIR or the temporary directory,
// private to the user.
func RunRoot() Root { return RunRootIn(os.Environ()) }

// RunRootIn is the run root a cordon started with the environment env uses (the caller's
// own when env is nil), so that a program starting cordon finds what it publishes.
func RunRootIn(env []string) Root {
	if env == nil {
		env = os.Environ()
	}
	get := func(name string) string {
		v := ""
		for _, e := range env {
			if k, val, ok := strings.Cut(e, "="); ok && k == name {
				v = val // the last one wins, as for exec
			}
		}
		return v
	}
	if d := get(RunRootEnv); d != "" {
		return Root(filepath.Clean(d)) // a relative one is refused where it is used
	}
	if os.Geteuid() == 0 {
		return "/run/cordon/runs"
	}
	if d := get("XDG_RUNTIME_DIR"); d != "" {
		return Root(filepath.Join(d, "cordon", "runs"))
	}
	return Root(filepath.Join(os.TempDir(), "cordon-"+strconv.Itoa(os.Geteuid()), "runs"))
}

// String is the root directory.
func (r Root) String() string { return string(r) }

// Run is run id's private directory.
func (r Root) Run(id string) string { return filepath.Join(string(r), id) }

// Sessions is where session supervisors publish their sockets, records and logs.
func (r Root) Sessions() string { return filepath.Join(string(r), "sessions") }

// SessionSocket is session id's supervisor socket.
func (r Root) SessionSocket(id string) string { return filepath.Join(r.Sessions(), id+".sock") }

// SessionInfo is session id's record (session/wire.Info).
func (r Root) SessionInfo(id string) string { return filepath.Join(r.Sessions(), id+".json") }

// SessionLog is session id's supervisor log.
func (r Root) SessionLog(id string) string { return filepath.Join(r.Sessions(), id+".log") }

// Gates is where runs' gate admin sockets live.
func (r Root) Gates() string { return filepath.Join(string(r), "gates") }

// GateSocket is run id's gate admin socket.
func (r Root) GateSocket(id string) string { return filepath.Join(r.Gates(), id+".sock") }

// BPFRootEnv names the variable that, when set, is the bpffs directory the monitor pins
// its programs in instead of [DefaultBPFRoot]; tests keep theirs apart with it. It must
// be an absolute path on a bpffs.
const BPFRootEnv = "CORDON_BPF_ROOT"

// DefaultBPFRoot is where the syscall monitor pins the programs every monitored run on
// the host shares, one directory per version of the programs:
//
//	/sys/fs/bpf/cordon/            root only (0700); flock(2) on it serialises loading,
//	                               joining, leaving and gc
//	/sys/fs/bpf/cordon/v-HASH/     one program set: links, the runs, rings and levels maps
//	/sys/fs/bpf/cordon/load-PID/   a set being loaded, renamed to v-HASH when complete
//
// It is host-global, not per run root: every cordon on the host, whatever its
// $CORDON_RUN_ROOT, shares one set of attached programs and one lock.
const DefaultBPFRoot = "/sys/fs/bpf/cordon"

// BPFRoot is the monitor's bpffs directory in this process's environment:
// $CORDON_BPF_ROOT when set, else [DefaultBPFRoot].
func BPFRoot() string {
	if d := os.Getenv(BPFRootEnv); d != "" {
		return filepath.Clean(d)
	}
	return DefaultBPFRoot
}

// BPFLock is the lock file that serialises every change to the monitor's pins under the
// bpffs directory root ([BPFRoot]), mounting the bpffs included: a regular file under
// /run/cordon (bpffs holds no regular files), named after root so that a test's own
// root has its own lock.
func BPFLock(root string) string {
	name := strings.ReplaceAll(strings.Trim(filepath.Clean(root), "/"), "/", "-")
	return filepath.Join("/run/cordon", "bpf-"+name+".lock")
}
