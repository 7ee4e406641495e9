package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/contract"
)

// MaxPushCommits bounds the commits one push may publish: the approver is shown every
// one of them, and a request that would publish more is refused (push it outside
// cordon, after reviewing it there).
const MaxPushCommits = 1000

// maxCommitLine bounds one line of the commit list.
const maxCommitLine = 120

// pinPush pins p in the workspace and computes what it would publish, in a scratch
// repository made in a private directory (p.home) that the approved push runs from
// too: the objects shown are the objects pushed, whatever the sandbox does to its own
// meanwhile. The caller removes p.home (push.cleanup) when the request ends.
func (s *Service) pinPush(ctx context.Context, p *push, g contract.Gate) (err error) {
	if p.home, err = os.MkdirTemp("", "cordon-gate-"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			p.cleanup()
		}
	}()
	home := p.home
	p.pol = s.cfg.Policy
	gitDir := filepath.Join(s.cfg.Workspace, ".git")
	rr, err := readRefs(gitDir)
	if err != nil {
		return err
	}
	cfg := filepath.Join(home, "repo-config")
	if err := copyConfig(gitDir, cfg); err != nil {
		return err
	}
	env := hardenedEnv(home, "", nil)
	if err := p.resolveURL(ctx, home, cfg, env); err != nil {
		return err
	}
	format, _ := git(ctx, p.pol, home, env, "config", "--file", cfg, "--get", "extensions.objectformat")
	p.format = strings.TrimSpace(format)
	env = hardenedEnv(home, "", nil, p.overrides()...)
	if p.scratch, err = makeScratch(ctx, p.pol, home, s.cfg.Workspace, p.format, env); err != nil {
		return err
	}
	if p.packs, err = packsOf(s.cfg.Workspace); err != nil {
		return err
	}
	senv := p.scratchEnv(env)
	for i := range p.refs {
		if err := p.pinRef(ctx, home, rr, senv, &p.refs[i]); err != nil {
			return err
		}
	}
	p.state = rr.state()
	known, err := s.remoteKnown(ctx, home, p, g, senv)
	if err != nil {
		return err
	}
	return publishes(ctx, home, senv, p, known)
}

// scratchEnv is env for git in p's scratch repository: none of the workspace's
// repository configuration, no replace refs.
func (p *push) scratchEnv(env []string) []string {
	return append(env[:len(env):len(env)], "GIT_DIR="+p.scratch, "GIT_NO_REPLACE_OBJECTS=1")
}

// cleanup removes p's private directory, scratch repository included.
func (p *push) cleanup() {
	if p != nil && p.home != "" {
		os.RemoveAll(p.home)
	}
}

// remoteKnown lists the object ids the remote's refs point at, as the remote itself
// says (git ls-remote of the pinned URL), keeping those the workspace holds: refs the
// sandbox wrote, in this run or an earlier one, cannot hide a commit. It asks without
// a credential first, and with the gate's, minted for the listing alone, when that
// fails.
func (s *Service) remoteKnown(ctx context.Context, home string, p *push, g contract.Gate, env []string) ([]string, error) {
	out, err := gitInput(ctx, p.pol, home, env, "", 8<<20, "ls-remote", "--", p.url)
	if err != nil && g.Credential != nil && s.cfg.Mint != nil {
		out, err = s.lsRemoteWithCredential(ctx, home, p, g)
	}
	if err != nil {
		s.cfg.Log.Info("listing the remote's refs for a gate", logKeyGate, g.Name, logKeyErr, err)
		return nil, fmt.Errorf("could not list the refs of %s (git ls-remote failed), so what the push would publish is unknown", p.url)
	}
	var oids strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if oid, _, ok := strings.Cut(l, "\t"); ok && isOID(oid) {
			oids.WriteString(oid + "\n")
		}
	}
	have, err := gitInput(ctx, p.pol, home, env, oids.String(), 16<<20, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil, errors.New("checking the remote's refs against the repository failed")
	}
	var known []string
	for _, l := range strings.Split(have, "\n") {
		if oid, typ, ok := strings.Cut(l, " "); ok && isOID(oid) && typ != "missing" {
			known = append(known, oid)
		}
	}
	return known, nil
}

// lsRemoteWithCredential is git ls-remote with the gate's credential, minted for it
// and revoked right after.
func (s *Service) lsRemoteWithCredential(ctx context.Context, home string, p *push, g contract.Gate) (string, error) {
	cenv, revoke, err := s.cfg.Mint(ctx, *g.Credential)
	if err != nil {
		return "", err
	}
	defer s.revoke(ctx, revoke)
	env := append(hardenedEnv(home, "", g.Credential, p.overrides()...), cenv...)
	return gitInput(ctx, p.pol, home, env, "", 8<<20, "ls-remote", "--", p.url)
}

// publishes lists, one line each, the commits reachable from p's sources and from none
// of the known object ids, with the files the newest of them change and the history
// of what is pushed. It runs in the scratch repository (env).
func publishes(ctx context.Context, home string, env []string, p *push, known []string) error {
	var in strings.Builder
	for _, r := range p.refs {
		if r.OID != "" {
			in.WriteString(r.OID + "\n")
		}
	}
	if in.Len() == 0 {
		return nil // deletions only
	}
	tips := in.String()
	for _, k := range known {
		in.WriteString("^" + k + "\n") // git 2.39's --stdin takes no --not
	}
	// Every object the push would send must be here now: the list and the files shown
	// are of these, and these are what is pushed.
	if _, err := gitInput(ctx, p.pol, home, env, in.String(), 1<<10, "rev-list", "--objects", "--stdin", "--quiet"); err != nil {
		return errors.New("the repository lacks objects of what would be pushed (a commit, tree or file is missing)")
	}
	out, err := gitInput(ctx, p.pol, home, env, in.String(), (MaxPushCommits+1)*(maxCommitLine+64), "log", "--stdin", "--no-decorate",
		"--format=%H %an <%ae> %s", "-n", fmt.Sprint(MaxPushCommits+1))
	if err != nil {
		return errors.New("listing the commits the push would publish failed")
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		if len(l) > maxCommitLine {
			l = l[:maxCommitLine] + "…"
		}
		p.commits = append(p.commits, l)
	}
	if len(p.commits) > MaxPushCommits {
		return fmt.Errorf("the push would publish more than %d commits, too many to show the approver; push them outside cordon", MaxPushCommits)
	}
	if p.detail, err = gitInput(ctx, p.pol, home, env, in.String(), 16<<10, "log", "--stdin", "--no-decorate", "--no-textconv", "--no-ext-diff", "--stat", "--format=%h %s", "-n", "20"); err != nil {
		return errors.New("listing the files the push would publish failed")
	}
	if p.history, err = gitInput(ctx, p.pol, home, env, tips, 8<<10, "log", "--stdin", "--no-decorate", "--format=%h %s", "-n", "20"); err != nil {
		return errors.New("listing the history of what would be pushed failed")
	}
	return nil
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
	fmt.Fprintf(b, "\ncommits the push would publish (%d, every one: reachable from what is pushed and from no ref the remote lists):\n", len(p.commits))
	if len(p.commits) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, c := range p.commits {
		b.WriteString("  " + c + "\n")
	}
	if strings.TrimSpace(p.detail) != "" {
		fmt.Fprintf(b, "\nfiles they change (the newest 20 commits):\n%s", indent(p.detail))
	}
	if strings.TrimSpace(p.history) != "" {
		fmt.Fprintf(b, "\nhistory of what is pushed (the newest 20 commits):\n%s", indent(p.history))
	}
}
