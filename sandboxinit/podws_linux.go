package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/sandboxinit/wire"
	"github.com/cordonhq/cordon/server/workspace"
)

// A Pod's workspace is an emptyDir volume that the commands see with parts read-only
// (.git, protected names) or masked, so cordon fills it and reads it back through
// process 1, on a second mount of the whole volume that no command can reach
// (wire.PodWorkspace; the spec's Hide holds it). Process 1 does neither itself: for
// each fill or pack it starts `internal podws fill|pack DIR BYTES ENTRIES`, a child
// of its own confined by a Landlock domain to that mount (and cordon's directory, to
// start) with the request's three descriptors as its stdio, and reports its exit like a
// command's. So the tar code, walking a tree a hostile command writes as it walks,
// runs with no reach past the workspace even if it had a bug, and no crash or memory
// of it is process 1's. It runs without the commands' seccomp filter, which answers
// openat2 ENOSYS: the walk resolves every path with openat2 (RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS), so no link a command makes, even mid-walk, is followed.

// PodWorkspaceArg is the `internal` subcommand that fills or packs a Pod's workspace.
const PodWorkspaceArg = "podws"

// wsState is what process 1 holds of its Pod's workspace volume.
type wsState struct {
	spec   *wire.PodWorkspace
	fill   *linux.Ruleset // the children's domains (nil: Landlock is unavailable, as for commands)
	pack   *linux.Ruleset
	ran    bool // a command was started: no fill any more
	filled bool
}

// newWSState builds the children's rulesets for spec (nil: the spec has no workspace
// volume, and fill and pack are refused).
func newWSState(spec *wire.PodWorkspace, landlock bool) (*wsState, error) {
	ws := &wsState{spec: spec}
	if spec == nil || !landlock {
		return ws, nil
	}
	var err error
	if ws.fill, err = linux.NewRuleset(linux.FSRules{Read: []string{paths.SandboxDir}, Write: []string{spec.Dir}}); err != nil {
		return nil, err
	}
	if ws.pack, err = linux.NewRuleset(linux.FSRules{Read: []string{paths.SandboxDir, spec.Dir}}); err != nil {
		return nil, err
	}
	return ws, nil
}

// workspaceOp starts a fill or a pack for m, whose exit the reaper reports, or
// answers its refusal at once.
func (s *server) workspaceOp(m ctl.Msg, files []*os.File) {
	defer ctl.CloseFiles(files)
	refuse := func(why string) { _ = s.c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Error: why}) }
	ws := s.ws
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(files) != 3:
		refuse("malformed " + m.Op + " request")
		return
	case ws == nil || ws.spec == nil:
		refuse("this sandbox has no workspace volume to " + m.Op)
		return
	case m.Op == ctl.OpFill && ws.filled:
		refuse("the workspace was filled already")
		return
	case m.Op == ctl.OpFill && ws.ran:
		refuse("the workspace is filled before any command runs")
		return
	}
	rs := ws.pack
	if m.Op == ctl.OpFill {
		ws.filled, rs = true, ws.fill
	}
	argv := []string{s.k.self, "internal", PodWorkspaceArg, m.Op, ws.spec.Dir,
		strconv.FormatInt(ws.spec.Bytes, 10), strconv.Itoa(ws.spec.Entries)}
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	var pid int
	err := linux.OnOwnThread(func() error {
		if rs != nil {
			if err := rs.RestrictThread(); err != nil {
				return err
			}
		}
		var err error
		pid, err = linux.ForkExec(s.k.self, argv, attr)
		return err
	})
	if err != nil {
		refuse(fmt.Sprintf("starting the %s: %v", m.Op, err))
		return
	}
	s.running[pid], s.groups[m.ID] = m.ID, pid
}

// PodWorkspaceMain is `internal podws fill|pack DIR BYTES ENTRIES`, started by a Pod's
// process 1 confined to DIR: fill unpacks the tar on stdin into DIR, pack writes DIR
// as a tar to stdout, each bounded by BYTES and ENTRIES (server/workspace). It exits 0
// when done, 1 with the reason on stderr otherwise (a pack's output is then not the
// whole archive: it lacks its end).
func PodWorkspaceMain(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "cordon: internal podws: for cordon's own use only")
		return 2
	}
	bytes, err1 := strconv.ParseInt(args[2], 10, 64)
	entries, err2 := strconv.Atoi(args[3])
	if err := errors.Join(err1, err2); err != nil || bytes <= 0 || entries <= 0 {
		fmt.Fprintf(os.Stderr, "cordon: internal podws: bad bounds %q %q\n", args[2], args[3])
		return 2
	}
	lim := workspace.Limits{Bytes: bytes, Entries: entries}
	var err error
	switch args[0] {
	case ctl.OpFill:
		_, err = workspace.UnpackAsCaller(os.Stdin, args[1], lim)
	case ctl.OpPack:
		var skipped int
		_, skipped, err = workspace.Pack(os.Stdout, args[1], lim)
		if skipped > 0 {
			fmt.Fprintf(os.Stderr, "cordon: pack: %d special files (FIFOs, sockets, devices) left out\n", skipped)
		}
	default:
		err = fmt.Errorf("%q: neither fill nor pack", args[0])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
