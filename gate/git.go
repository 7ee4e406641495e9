package gate

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// Every operation, and every git command cordon runs for a push (in its scratch
// repository, never in the workspace: push.go), runs with:
//
//   - an environment built from nothing (below) and a fresh, empty HOME, so no user
//     git configuration or credential store of the host user is read (ssh is the
//     exception: OpenSSH finds ~/.ssh through the password database, not $HOME, so an
//     ssh push uses the keys and ssh configuration of the user cordon runs as);
//   - GIT_CONFIG_NOSYSTEM and GIT_CONFIG_GLOBAL=/dev/null, and [gitOverrides] passed as
//     command-line configuration (GIT_CONFIG_COUNT), which would win over a
//     repository's where a setting would run code or hand the credential elsewhere.

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
		// refuse it.
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

// git runs a short git command for the preview or a check, bounded in time and output.
func git(ctx context.Context, pol hostexec.Policy, dir string, env []string, args ...string) (string, error) {
	return gitInput(ctx, pol, dir, env, "", 16<<10, args...)
}

// gitInput is git with stdin and an output bound of max bytes.
// git is resolved and checked (hostexec) in env's PATH and runs through the checked
// descriptor.
func gitInput(ctx context.Context, pol hostexec.Policy, dir string, env []string, stdin string, max int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	prog, err := hostexec.Resolve("git", envPath(env), pol)
	if err != nil {
		return "", err
	}
	defer prog.Close()
	cmd := prog.Command(ctx, args, env)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
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
