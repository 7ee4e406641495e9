package gate

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/contract"
)

// The workspace, its .git included, may have been written by the untrusted agent. An
// operation, and the git commands of the preview, therefore run with:
//
//   - an environment built from nothing (below) and a fresh, empty HOME, so no user
//     configuration, credential store or ssh key of the host user is read;
//   - GIT_CONFIG_NOSYSTEM and GIT_CONFIG_GLOBAL=/dev/null: only the repository's own
//     configuration is read, and [gitOverrides], passed as command-line configuration
//     (GIT_CONFIG_COUNT), override it where a setting would run code or hand the
//     credential elsewhere;
//   - a refusal ([checkRepoConfig]) when the repository configuration sets a key that
//     cannot be overridden that way ([dangerousKey]).

// hardenedEnv is an operation's environment before the credential's entries.
// extra are further command-line settings (a push's transports).
func hardenedEnv(home, workspace string, cred *contract.Credential, extra ...[2]string) []string {
	env := []string{
		"PATH=" + pathEnv,
		"HOME=" + home,
		"LANG=C.UTF-8",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",         // empty: never run an askpass program
		"GIT_OPTIONAL_LOCKS=0", // the preview's status does not write the index
		"GIT_PAGER=cat",
		"PAGER=cat",
	}
	kv := append(gitOverrides(workspace, cred), extra...)
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(kv)))
	for i, p := range kv {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+p[0], "GIT_CONFIG_VALUE_"+n+"="+p[1])
	}
	return env
}

// gitOverrides are command-line configuration entries, which git reads after the
// repository's, so they win for single-valued keys; an empty credential.helper clears
// the helpers configured before it (for every URL).
func gitOverrides(workspace string, cred *contract.Credential) [][2]string {
	kv := [][2]string{
		{"core.hooksPath", "/dev/null"}, // no hook of .git/hooks or elsewhere runs
		{"core.fsmonitor", "false"},
		{"core.sshCommand", "ssh"},
		{"core.askPass", ""},
		{"core.pager", "cat"},
		{"protocol.ext.allow", "never"}, // ext:: URLs run commands
		{"log.showSignature", "false"},  // would run gpg.program
		{"push.recurseSubmodules", "no"},
		{"submodule.recurse", "false"},
		{"credential.helper", ""},
	}
	if cred != nil {
		kv = append(kv, [2]string{"credential.helper", credentialHelper(cred)})
	}
	if workspace != "" {
		// The workspace may be owned by another uid (container backends); git would
		// refuse it. The settings above and checkRepoConfig are what make it safe.
		kv = append(kv, [2]string{"safe.directory", workspace})
	}
	return kv
}

// credentialHelper is a shell-function helper that answers "get" with the minted
// credential read from its environment variable (its value never appears in argv or
// configuration), and only for the credential's hosts when it lists some.
func credentialHelper(c *contract.Credential) string {
	hosts := "*"
	if len(c.Hosts) > 0 {
		hosts = strings.Join(c.Hosts, "|")
	}
	// Names match [A-Za-z_][A-Za-z0-9_]* and hosts are normalized names or addresses
	// (contract.Compile), so neither can break out of the script.
	return `!f() { test "$1" = get || exit 0; h=; while IFS= read -r l; do case "$l" in host=*) h="${l#host=}";; esac; done; ` +
		`h="${h%%:*}"; case "$h" in ` + hosts + `) ;; *) exit 0;; esac; ` +
		`echo username=x-access-token; printf 'password=%s\n' "$` + c.Name + `"; }; f`
}

// dangerousKey reports why a repository configuration key is refused, or "". Keys are
// lower-case as `git config --name-only` prints them (subsections keep their case).
func dangerousKey(key string) string {
	k := strings.ToLower(key)
	sec, _, _ := strings.Cut(k, ".")
	last := k[strings.LastIndex(k, ".")+1:]
	switch {
	case sec == "url" && (last == "insteadof" || last == "pushinsteadof"):
		return "rewrites URLs, which could send the push and the credential elsewhere"
	case sec == "remote" && looksLikeURL(subsection(key)):
		return "is a remote named like a URL: `git push URL` would go where it says instead"
	case sec == "remote" && (last == "receivepack" || last == "uploadpack"):
		return "names a command that git runs for local and ssh transports"
	case sec == "remote" && last == "proxy", sec == "http" && (strings.Contains(last, "proxy") ||
		strings.HasPrefix(last, "ssl") || last == "extraheader" || last == "cookiefile" || last == "curloptresolve"):
		return "changes where or how HTTPS connects, which could expose the credential"
	case k == "core.gitproxy", k == "core.alternaterefscommand", k == "core.worktree":
		return "runs a command or points git outside the workspace"
	case sec == "filter", sec == "gpg":
		return "names a program that git may run"
	case sec == "diff" && (last == "external" || last == "command" || last == "textconv"):
		return "names a program that git may run"
	case sec == "include" || sec == "includeif":
		return "includes other configuration files, which can change after this check"
	}
	return ""
}

// checkRepoConfig refuses a workspace whose repository configuration sets a key
// [gitOverrides] cannot neutralise. It lists only the repository's own keys (and what
// they include): system and global configuration are off.
func checkRepoConfig(ctx context.Context, workspace, home string) error {
	env := hardenedEnv(home, workspace, nil)
	out, err := git(ctx, workspace, env, "config", "--list", "--name-only")
	if err != nil {
		return nil // not a repository, or no configuration: nothing to refuse
	}
	var bad []string
	for _, k := range strings.Split(strings.TrimSpace(out), "\n") {
		if k == "" || isOverride(k) {
			continue
		}
		if why := dangerousKey(k); why != "" {
			bad = append(bad, k+" ("+why+")")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("refused: the workspace's git configuration sets %s; remove it and ask again", strings.Join(bad, ", "))
	}
	return nil
}

// isOverride reports whether k is one of the command-line keys hardenedEnv sets,
// which `git config --list` includes.
func isOverride(k string) bool {
	for _, p := range gitOverrides("", &contract.Credential{}) {
		if strings.EqualFold(p[0], k) {
			return true
		}
	}
	return strings.EqualFold(k, "safe.directory")
}

// git runs a short git command for the preview or a check, bounded in time and output.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return gitInput(ctx, dir, env, "", 16<<10, args...)
}

// gitInput is git with stdin and an output bound of max bytes.
func gitInput(ctx context.Context, dir string, env []string, stdin string, max int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(stdin)
	if p, err := lookPath("git", env); err == nil {
		cmd.Path, cmd.Err = p, nil
	}
	out := &boundedBuffer{max: max}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	setProcessGroup(cmd)
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// subsection is the middle of a three-part configuration key ("remote.X.url" → "X").
func subsection(key string) string {
	first, last := strings.Index(key, "."), strings.LastIndex(key, ".")
	if first < 0 || last <= first {
		return ""
	}
	return key[first+1 : last]
}

// looksLikeURL reports whether a remote's name could be taken for a URL or a path by
// `git push NAME` (git resolves a configured remote of that name first).
func looksLikeURL(name string) bool {
	return strings.Contains(name, "://") || strings.Contains(name, ":") || strings.HasPrefix(name, "/") ||
		strings.HasPrefix(name, ".") || strings.Contains(name, "@")
}
