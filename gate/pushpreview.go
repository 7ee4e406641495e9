package gate

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// MaxPushCommits bounds the commits one push may publish: the approver is shown every
// one of them, and a request that would publish more is refused (push it outside
// cordon, after reviewing it there).
const MaxPushCommits = 1000

// maxCommitLine bounds one line of the commit list.
const maxCommitLine = 120

// Snapshot records what the remotes held as far as the workspace repository knew when
// the run started (its remote-tracking branches and tags), before the sandbox could
// write a ref: a push's preview lists every commit reachable from what it pushes and
// from none of these. Call it before the sandbox starts; without it every reachable
// commit is listed.
func (s *Service) Snapshot(ctx context.Context) {
	if s.cfg.Workspace == "" || !s.hasPush() {
		return
	}
	home, err := os.MkdirTemp("", "cordon-gate-")
	if err != nil {
		return
	}
	defer os.RemoveAll(home)
	out, err := gitInput(ctx, s.cfg.Workspace, hardenedEnv(home, s.cfg.Workspace, nil), "", 8<<20,
		"for-each-ref", "--format=%(objectname)", "refs/remotes", "refs/tags")
	if err != nil {
		return
	}
	s.known = strings.Fields(out)
}

func (s *Service) hasPush() bool {
	for _, g := range s.cfg.Gates {
		if p, _ := parsePush(g.Run); p != nil {
			return true
		}
	}
	return false
}

// pinPush pins p in the workspace and lists the commits it would publish.
func (s *Service) pinPush(ctx context.Context, p *push) error {
	home, err := os.MkdirTemp("", "cordon-gate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	env := hardenedEnv(home, s.cfg.Workspace, nil)
	if err := p.pin(ctx, s.cfg.Workspace, env); err != nil {
		return err
	}
	p.commits, p.detail, err = publishes(ctx, s.cfg.Workspace, env, p, s.known)
	return err
}

// publishes lists, one line each, the commits reachable from p's sources and from no
// known object id, and the files the newest of them change.
func publishes(ctx context.Context, ws string, env []string, p *push, known []string) ([]string, string, error) {
	var in strings.Builder
	for _, r := range p.refs {
		if r.OID != "" {
			in.WriteString(r.OID + "\n")
		}
	}
	if in.Len() == 0 {
		return nil, "", nil // deletions only
	}
	for _, k := range known {
		in.WriteString("^" + k + "\n") // git 2.39's --stdin takes no --not
	}
	out, err := gitInput(ctx, ws, env, in.String(), (MaxPushCommits+1)*(maxCommitLine+64), "log", "--stdin", "--no-decorate",
		"--format=%H %an <%ae> %s", "-n", fmt.Sprint(MaxPushCommits+1))
	if err != nil {
		return nil, "", fmt.Errorf("listing the commits the push would publish: %w", err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		if len(l) > maxCommitLine {
			l = l[:maxCommitLine] + "…"
		}
		lines = append(lines, l)
	}
	if len(lines) > MaxPushCommits {
		return nil, "", fmt.Errorf("the push would publish more than %d commits, too many to show the approver; push them outside cordon", MaxPushCommits)
	}
	detail, _ := gitInput(ctx, ws, env, in.String(), 16<<10, "log", "--stdin", "--no-decorate", "--no-textconv", "--no-ext-diff", "--stat", "--format=%h %s", "-n", "20")
	return lines, detail, nil
}

// writePush is the push's part of the preview.
func writePush(b *strings.Builder, p *push) {
	where := "named by the contract"
	if p.remote != p.url {
		where = fmt.Sprintf("the repository's remote %q", p.remote)
	}
	fmt.Fprintf(b, "push to:    %s (%s)\n", p.url, where)
	for _, r := range p.refs {
		force := ""
		if r.Force {
			force = " (forced: may overwrite what is there)"
		}
		if r.OID == "" {
			fmt.Fprintf(b, "            delete %s%s\n", r.Dst, force)
			continue
		}
		fmt.Fprintf(b, "            %s (%s) -> %s%s\n", r.OID, r.Src, r.Dst, force)
	}
	fmt.Fprintf(b, "pinned:     approving pushes exactly these object ids; it is refused if HEAD or any ref moves first\n")
	fmt.Fprintf(b, "\ncommits the push would publish (%d, every one; those on no remote-tracking branch or tag as of the run's start):\n", len(p.commits))
	if len(p.commits) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, c := range p.commits {
		b.WriteString("  " + c + "\n")
	}
	if strings.TrimSpace(p.detail) != "" {
		fmt.Fprintf(b, "\nfiles they change (the newest 20 commits):\n%s", indent(p.detail))
	}
}
