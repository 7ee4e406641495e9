package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/contract"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/server/workspace"
)

// The workspace on the host is the session's: the runner diffs it after each command
// and logs the diff. The Pod's is a volume on its node. The backend fills the Pod's
// from the host's before the first command (without the plan's hidden paths) and,
// after each command, packs the Pod's whole and syncs the host's to it for the paths
// a command may write there. A difference anywhere else is never brought back: a
// command cannot make one (those paths are read-only or masked in the Pod), and the
// plan's placeholders (protected names the host lacks, empty in the Pod) differ by
// design.

// limits bounds a fill and a pack as the Pod's volume is bounded.
func (sb *podSandbox) limits() workspace.Limits {
	bytes := sb.cfg.WorkspaceBytes
	if bytes <= 0 {
		bytes = podspec.DefaultWorkspaceBytes
	}
	return workspace.Limits{Bytes: bytes, Entries: podspec.WorkspaceEntries}
}

// fill sends the host's workspace into the Pod's, before any command.
func (sb *podSandbox) fill(ctx context.Context, ch *placement.Channel) error {
	if sb.plan.Workspace == "" {
		return nil
	}
	pr, pw := io.Pipe()
	go func() {
		_, _, err := workspace.PackOnly(pw, sb.plan.Workspace, sb.limits(), func(rel string) bool { return !sb.hidden(rel) })
		pw.CloseWithError(err)
	}()
	err := ch.Fill(ctx, pr)
	pr.CloseWithError(errors.New("the fill ended"))
	if err != nil {
		return fmt.Errorf("filling the Pod's workspace from %s: %w", sb.plan.Workspace, err)
	}
	return nil
}

// sync brings the Pod's workspace back into the host's, for the paths a command may
// write.
func (sb *podSandbox) sync(ctx context.Context, ch *placement.Channel) error {
	if sb.plan.Workspace == "" {
		return nil
	}
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := ch.Pack(ctx, pw)
		pw.CloseWithError(err)
		packed <- err
	}()
	_, err := workspace.Sync(pr, sb.plan.Workspace, sb.limits(), sb.writable)
	pr.CloseWithError(errors.New("the sync ended"))
	if perr := <-packed; err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("bringing the Pod's workspace back to %s: %w", sb.plan.Workspace, err)
	}
	return nil
}

// mountOf is the plan's innermost mount at rel (a path below the workspace), or nil.
func (sb *podSandbox) mountOf(rel string) *contract.Mount {
	abs := filepath.Join(sb.plan.Workspace, rel)
	var best *contract.Mount
	for i := range sb.plan.Mounts {
		m := &sb.plan.Mounts[i]
		if (abs == m.Path || strings.HasPrefix(abs, m.Path+"/")) && (best == nil || len(m.Path) > len(best.Path)) {
			best = m
		}
	}
	return best
}

// writable reports whether a command may write rel in the workspace: its innermost
// mount is a read-write bind.
func (sb *podSandbox) writable(rel string) bool {
	m := sb.mountOf(rel)
	return m != nil && m.Type == contract.Bind && m.Access == contract.ReadWrite
}

// hidden reports whether rel is masked from commands (deny_read): it stays on the host.
func (sb *podSandbox) hidden(rel string) bool {
	m := sb.mountOf(rel)
	return m != nil && m.Type == contract.Mask
}
