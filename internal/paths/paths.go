// Package paths names where cordon keeps its host-side state, for the packages that
// must agree on it without importing each other (the runner, the session supervisor and
// client, the gates, gc, the audit log, the credential ledger): the run root and every
// path in it (methods of [Root]), the state directory with the audit root and the
// ledger ([StateDirIn], [AuditRoot], [Ledger]), and the list no contract may expose
// ([Protected]). It is also where each is trusted: a directory chain is made and checked
// from / down ([MakeDir], [CheckDir]), a record is read only as its owner's
// ([ReadRecord]) and a unix socket is kept only when the expected uid answers on it
// ([DialSocket], [CheckPeer]).
package paths

import (
	"errors"
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
// /run/cordon/runs for root, else under $XDG_RUNTIME_DIR (when absolute) or
// $TMPDIR (else /tmp), private to the user. Its directory chain is checked wherever it
// is used ([MakeDir], [CheckDir]).
func RunRoot() Root { return RunRootIn(os.Environ()) }

// RunRootIn is the run root a cordon started with the environment env uses (the caller's
// own when env is nil), so that a program starting cordon finds what it publishes.
func RunRootIn(env []string) Root {
	if env == nil {
		env = os.Environ()
	}
	get := func(name string) string { return lookup(env, name) }
	if d := get(RunRootEnv); d != "" {
		return Root(filepath.Clean(d)) // a relative one is refused where it is used
	}
	if os.Geteuid() == 0 {
		return Root(filepath.Join(HostDir, "runs"))
	}
	if d := get("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return Root(filepath.Join(d, "cordon", "runs"))
	}
	// Under a sticky, world-writable /tmp another user may have made this directory
	// first: [MakeDir] and [CheckDir] refuse it then, never use it.
	tmp := get("TMPDIR")
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	return Root(filepath.Join(tmp, "cordon-"+strconv.Itoa(os.Geteuid()), "runs"))
}

// StateDirIn is the directory that keeps cordon's lasting state for a cordon started
// with the environment env (the caller's own when nil): $XDG_STATE_HOME/cordon when
// XDG_STATE_HOME is an absolute path (a relative one is ignored, as the XDG
// specification says), else $HOME/.local/state/cordon. The audit root and the
// credential ledger both derive from it by this one rule, and both are among the paths
// no contract can expose ([Protected]).
func StateDirIn(env []string) (string, error) {
	if env == nil {
		env = os.Environ()
	}
	if d := lookup(env, "XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(filepath.Clean(d), "cordon"), nil
	}
	home := lookup(env, "HOME")
	if !filepath.IsAbs(home) {
		h, err := os.UserHomeDir()
		if err != nil || !filepath.IsAbs(h) {
			return "", errors.New("no state directory: neither $XDG_STATE_HOME nor $HOME is an absolute path")
		}
		home = h
	}
	return filepath.Join(filepath.Clean(home), ".local", "state", "cordon"), nil
}

// AuditRoot is the default audit root: [StateDirIn]/runs.
func AuditRoot() (string, error) {
	d, err := StateDirIn(nil)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "runs"), nil
}

// SystemLedger is the credential ledger of a cordon run by root.
const SystemLedger = "/var/lib/cordon/ledger"

// Ledger is the credential ledger's directory: [SystemLedger] for root, else
// [StateDirIn]/ledger, beside the audit root; when there is no state directory, a
// private directory under the temporary directory (as the run root).
func Ledger() string {
	if os.Geteuid() == 0 {
		return SystemLedger
	}
	if d, err := StateDirIn(nil); err == nil {
		return filepath.Join(d, "ledger")
	}
	return filepath.Join(os.TempDir(), "cordon-"+strconv.Itoa(os.Geteuid()), "ledger")
}

// Protected lists the host paths of cordon's own state that no contract may expose to
// a sandbox, whatever it says: the audit root in force (auditRoot), the run root and
// the credential ledger. Every command compiles its plan with these.
func Protected(auditRoot string) []string {
	return []string{auditRoot, RunRoot().String(), Ledger()}
}

func lookup(env []string, name string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == name {
			v = val // the last one wins, as for exec
		}
	}
	return v
}

// String is the root directory.
func (r Root) String() string { return string(r) }

// Run is run id's private directory.
func (r Root) Run(id string) string { return filepath.Join(string(r), id) }

// PlaceholderLock is the file runs flock while they decide which placeholders they
// make or adopt, and while they decide which they remove (package runner's
// lockPlaceholders): a removal and an adoption never interleave.
func (r Root) PlaceholderLock() string { return filepath.Join(string(r), "placeholders.lock") }

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

// HostDir is root's runtime directory on the host (/run is emptied at boot, when
// nothing cordon recorded there runs any more): root's run root, the uid leases, the
// monitor's locks. A hand-off's private mount namespace mounts its tmpfs at the same
// path, hiding what is below it there only.
const HostDir = "/run/cordon"

// UIDLeases is the directory of the host uid leases (internal/uids): host-wide, not per
// run root, since two cordons with different run roots lease from the same uids and
// must see each other's leases.
const UIDLeases = HostDir + "/uids"

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
	return filepath.Join(HostDir, "bpf-"+name+".lock")
}
