package contract

import (
	"slices"
	"strings"
)

// SystemPreset is what "@system" makes readable: the paths a program needs to run.
// Entries that do not exist on the host are skipped; entries that are symbolic links at
// the top level (merged /usr) become links in the sandbox.
var SystemPreset = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// systemSecrets are files inside the system preset that hold secrets; "@system" never
// shows them. Globs are expanded at compile time.
var systemSecrets = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/ssh/ssh_host_*_key", "/etc/ssl/private", "/etc/security/opasswd",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/cordon",
}

// mandatoryHome are credential stores under the caller's home directory (a trailing
// slash marks a directory). No contract
// can make them readable or writable except through a named widening with a why.
var mandatoryHome = []string{
	".ssh/", ".aws/", ".azure/", ".config/gcloud/", ".kube/", ".docker/", ".gnupg/",
	".netrc", ".git-credentials", ".config/gh/", ".config/hub/", ".npmrc", ".pypirc",
	".cargo/credentials", ".cargo/credentials.toml", ".vault-token", ".password-store/",
	".terraform.d/credentials.tfrc.json", ".config/op/", ".local/share/keyrings/",
	".m2/settings.xml", ".gem/credentials", ".config/containers/auth.json",
	// cordon's own state: the audit log must never be visible to the sandbox.
	".local/state/cordon/",
}

// mandatoryHost are host paths with the same status: container engine sockets (root on
// the host), kernel memory, cordon's own run directories.
var mandatoryHost = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/var/run/docker", "/run/docker",
	"/run/containerd", "/var/run/containerd", "/run/podman", "/var/run/podman",
	"/run/crio", "/var/run/crio", "/run/buildkit",
	"/proc/kcore", "/proc/kallsyms", "/dev/mem", "/dev/kmem", "/dev/port",
	"/sys/kernel/security", "/sys/firmware", "/boot",
	"/run/cordon", "/var/lib/cordon",
}

// MandatoryHome returns the credential stores under a home directory (relative to it; a
// trailing slash marks a directory) that no contract exposes except through a named
// widening. A backend that hides paths by rule rather than by mount (seatbelt) denies
// each one explicitly.
func MandatoryHome() []string { return slices.Clone(mandatoryHome) }

// MandatoryHost returns the host paths with the same status as [MandatoryHome]'s.
func MandatoryHost() []string { return slices.Clone(mandatoryHost) }

// credentialLikeName reports whether an environment variable name looks like it holds a
// credential. Such names may not be passed through env.pass (declare a credential).
func credentialLikeName(name string) bool {
	name = strings.ToUpper(name)
	for _, suf := range []string{"_TOKEN", "_KEY", "_PASSWORD", "_PASSWD", "_CREDENTIALS"} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	for _, sub := range []string{"SECRET", "PASSWORD", "TOKEN"} {
		if strings.Contains(name, sub) {
			return true
		}
	}
	for _, pre := range []string{"AWS_", "AZURE_", "GOOGLE_APPLICATION_CREDENTIALS", "VAULT_", "CORDON_GITHUB_"} {
		if strings.HasPrefix(name, pre) {
			return true
		}
	}
	switch name {
	case "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "DOCKER_HOST", "KUBECONFIG", "NETRC":
		return true
	}
	return false
}

// credentialLikeValue reports whether a value looks like a well-known secret format.
func credentialLikeValue(v string) bool {
	for _, pre := range []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
		"xoxb-", "xoxp-", "sk-ant-", "sk-proj-", "AKIA", "ASIA", "hvs.", "npm_",
		"cordon_"} {
		if len(v) > len(pre)+8 && strings.HasPrefix(v, pre) {
			return true
		}
	}
	return strings.Contains(v, "PRIVATE KEY-----")
}

// LooksLikeCredential reports whether an environment variable, by its name or its
// value, looks like it holds a credential. The runner redacts the values of such
// variables that the environment scrub removed from every audit log byte.
func LooksLikeCredential(name, value string) bool {
	return credentialLikeName(name) || credentialLikeValue(value)
}

// HostExecuted are the workspace entries that tools on the host run or obey later,
// outside any sandbox, without anyone choosing to build: on entering the directory
// (direnv, mise), on opening it (editors' workspace settings, tasks and language
// servers; dev containers), on starting an agent tool there (settings, hooks, MCP
// servers), and on the next git command (submodules, LFS's endpoint, the hooks of
// husky, pre-commit, lefthook and overcommit, a hooks directory core.hooksPath may
// name). Build files (Makefile, package.json scripts) run only when someone builds:
// the audit report flags their changes instead. They are read-only in the sandbox by
// default and cannot be created there (a filesystem.widen entry with a why releases
// one); `cordon explain` lists them. Entries ending in "/" are directories.
var HostExecuted = []string{
	".envrc", ".direnv/", "mise.toml", ".mise.toml",
	".vscode/", ".idea/", ".zed/", ".helix/", ".dir-locals.el", ".exrc", ".nvim.lua", ".devcontainer/", ".devcontainer.json",
	".claude/", ".mcp.json", ".cursor/", ".gemini/", ".aider.conf.yml",
	".gitmodules", ".lfsconfig", ".husky/", ".pre-commit-config.yaml", "lefthook.yml", ".lefthook.yml", "lefthook-local.yml",
	".lefthook/", ".overcommit.yml", ".githooks/",
}
