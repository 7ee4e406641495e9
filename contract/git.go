package contract

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cordonhq/cordon/internal/paths"
)

// filesystem.git values: what the sandbox may do to the workspace's own .git.
const (
	// GitReadOnly: the whole .git is read-only (the default). Git reads work; commits
	// fail.
	GitReadOnly = "read-only"
	// GitCommit: objects, refs, the index and logs are writable, so the agent can
	// commit, branch and tag; everything git on the host runs or obeys stays read-only
	// and cannot be created (gitPinned).
	GitCommit = "commit"
)

// gitPin is one entry of a .git that stays read-only under git: commit.
type gitPin struct {
	name string
	dir  bool
	// content is what a placeholder file holds when the entry does not exist yet:
	// git reads some names by their existence alone, and an empty file breaks it.
	content string
	why     string
}

// gitPinned are the entries of a git directory that make git on the host run a program,
// read another configuration or take objects, refs or remotes from elsewhere. Under
// git: commit they are read-only, and those missing are placeholders the sandbox
// cannot replace: a placeholder is a mount point, which cannot be renamed or removed.
var gitPinned = []gitPin{
	{name: "config", why: "git's configuration, which can run programs (core.fsmonitor, aliases, filters)"},
	{name: "config.worktree", why: "git's per-worktree configuration"},
	// A commondir file sends git to another directory for its configuration and
	// objects. "." names this one, which is what git assumes without the file.
	{name: "commondir", content: ".\n", why: "the pointer to where git takes its configuration from"},
	{name: "hooks", dir: true, why: "git's hooks, programs git runs"},
	{name: "info", dir: true, why: "git's attributes, excludes, grafts and sparse patterns"},
	{name: "modules", dir: true, why: "the submodules' git directories, each with a configuration and hooks"},
	{name: "worktrees", dir: true, why: "the linked worktrees' git directories"},
	{name: "remotes", dir: true, why: "git's remotes in the old file format"},
	{name: "branches", dir: true, why: "git's remotes in the older file format"},
	{name: "objects/info", dir: true, why: "git's alternates, objects borrowed from other repositories"},
	{name: "objects/pack", dir: true, why: "git's packs, where a link would lend another repository's objects"},
	// Created for good by the runner before the sandbox starts, so it is not a
	// placeholder; read-only so the sandbox cannot remove it.
	{name: paths.GitWritten, content: paths.GitWrittenContent, why: "cordon's record that a sandbox could write this index, which the diff then never trusts"},
}

// gitMode validates filesystem.git.
func (k *compiler) gitMode() string {
	g := k.c.Filesystem.Git
	switch g.Value {
	case "", GitReadOnly:
		return GitReadOnly
	case GitCommit:
		for _, d := range k.c.Filesystem.DenyWrite {
			if p, err := k.resolve(d.Value, k.ws); err == nil && p == filepath.Join(k.ws, ".git") {
				k.errorf(d.Pos, "filesystem.deny_write: .git conflicts with filesystem.git: commit at %s (drop one)", k.where(g.Pos))
			}
		}
		return GitCommit
	}
	k.errorf(g.Pos, "filesystem.git: want %s or %s, got %q", GitReadOnly, GitCommit, g.Value)
	return GitReadOnly
}

// gitProtected are the protected entries for the workspace's own .git: all of it
// read-only, or under git: commit only gitPinned. A .git that is not a directory (a
// worktree's pointer, or none) stays read-only whatever the mode.
func (k *compiler) gitProtected() []protected {
	dotgit := filepath.Join(k.ws, ".git")
	whole := []protected{{dotgit, true, true, "git's configuration and hooks, which git on the host runs", ReadOnly, ""}}
	k.plan.Git = k.gitMode()
	if k.plan.Git != GitCommit {
		return whole
	}
	if st, err := os.Lstat(dotgit); err != nil || !st.IsDir() {
		k.plan.Notes = append(k.plan.Notes, fmt.Sprintf("filesystem.git: commit needs %s to be a directory; it stays read-only", dotgit))
		k.plan.Git = GitReadOnly
		return whole
	}
	out := make([]protected, 0, len(gitPinned))
	for _, g := range gitPinned {
		out = append(out, protected{filepath.Join(dotgit, g.name), g.dir, true, g.why + ", read-only under git: commit", ReadOnly, g.content})
	}
	return out
}

// pushPacksReadOnly refuses a git push gate in a contract that widens the workspace's
// packs for writing (.git, .git/objects or .git/objects/pack): the push reads them where
// they are, and a pack rewritten in place between the request and the approval would
// send a commit other than the one the approver saw.
func (k *compiler) pushPacksReadOnly() {
	var push *Gate
	for i, g := range k.plan.Gates {
		if len(g.Run) > 1 && (g.Run[0] == "git" || strings.HasSuffix(g.Run[0], "/git")) && g.Run[1] == "push" {
			push = &k.plan.Gates[i]
			break
		}
	}
	if push == nil {
		return
	}
	packs := filepath.Join(k.ws, ".git", "objects", "pack")
	for _, w := range k.plan.Widenings {
		if w.Access == ReadWrite && (w.Path == packs || within(packs, w.Path)) {
			k.errorf(push.Pos, "gates: %s is a git push, and filesystem.widen (%s) makes %s writable: the push reads the packs where they are, "+
				"so the sandbox could change what is pushed after the approver looked; drop one", push.Name, w.Where, packs)
		}
	}
}
