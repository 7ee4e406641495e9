package seatbelt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// The run-time half's portable pieces: what a run refuses, the environment, the
// credential files. sandbox_darwin.go puts them together; these are tested everywhere.

// SecretsDirName is the directory, in the run directory, holding the credential files
// (deliver: file) and the run's CA bundle: mode 0700, files 0400, readable and not
// writable by the sandbox, removed when the sandbox is closed. macOS has no tmpfs, so
// unlike on Linux the values are on the disk of the run directory while the run lasts.
const SecretsDirName = "secrets"

// refusals is every promise of plan and host this backend cannot keep on macOS, as
// one error (nil when there is none). Each says what to change.
func refusals(plan *contract.Plan, host sandbox.Host) error {
	var errs []error
	if host.Stage != nil {
		errs = append(errs, fmt.Errorf("staged runs (--stage) need an overlay file system macOS does not have: %w", sandbox.ErrNoStage))
	}
	if (host.ControlSocket != "" || host.GateSocket != "") && host.Init == "" {
		errs = append(errs, errors.New("a session's process 1 and `cordon gate` are cordon's binary, and the runner gave none"))
	}
	if len(plan.Gates) > 0 && host.GateSocket == "" {
		errs = append(errs, errors.New("the plan has gates but the runner gave no gate socket"))
	}
	if host.EgressAddr == "" {
		errs = append(errs, errors.New("the egress proxy is not on a loopback port (the runner did not treat seatbelt as a loopback backend)"))
	}
	asked := func(name string, v bool) bool { return v && !slices.Contains(plan.Limits.Defaulted, name) }
	if asked("memory", plan.Limits.Memory > 0) {
		errs = append(errs, errors.New("limits.memory cannot be enforced: macOS has no cgroups, and XNU is not known to enforce RLIMIT_AS or RLIMIT_DATA on mmap'd memory"))
	}
	if asked("pids", plan.Limits.Pids > 0) {
		errs = append(errs, errors.New("limits.pids cannot be enforced: macOS has no cgroups, and RLIMIT_NPROC counts every process of the user, not the sandbox's"))
	}
	if plan.Limits.CPU > 0 {
		errs = append(errs, errors.New("limits.cpu cannot be enforced: macOS has no cgroups, and RLIMIT_CPU bounds each process's CPU seconds, not a share of the CPUs"))
	}
	if len(errs) == 0 {
		return nil
	}
	return errdefs.Unsupportedf("seatbelt: %w", errors.Join(errs...))
}

// sandboxEnv is env with every path the plan gives the sandbox that has no equivalent
// on macOS moved to the directory standing in for it: the private $HOME and /tmp to
// their run directories, credential files to secrets. Each value, and each element
// of a colon-separated list (PATH), is rewritten when it is such a path or inside one.
// TMPDIR is set to the private /tmp, which macOS tools prefer over /tmp.
func sandboxEnv(env []string, dirs []PrivateDir, secrets string) []string {
	m, tmp := newMover(dirs, secrets), ""
	for _, d := range dirs {
		if d.For == "/tmp" || d.For == "/private/tmp" {
			tmp = d.Host
		}
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "TMPDIR" && tmp != "" {
			continue
		}
		parts := strings.Split(v, ":")
		for i, p := range parts {
			parts[i] = m.move(p)
		}
		out = append(out, k+"="+strings.Join(parts, ":"))
	}
	if tmp != "" {
		out = append(out, "TMPDIR="+tmp)
	}
	return out
}

// mover maps the plan's paths that have no equivalent on macOS to their stand-ins.
type mover map[string]string

func newMover(dirs []PrivateDir, secrets string) mover {
	m := mover{}
	if secrets != "" {
		m[paths.SandboxSecrets] = secrets
	}
	for _, d := range dirs {
		m[d.For] = d.Host
	}
	return m
}

// move is p in its stand-in when p is one of m's paths or inside one, else p.
func (m mover) move(p string) string {
	for from, to := range m {
		if p == from || strings.HasPrefix(p, from+"/") {
			return to + p[len(from):]
		}
	}
	return p
}

// linkGate puts the link named cordon to host.Init in the directory standing in for
// sandbox.GateBinDir, when dirs has one (the plan has gates).
func linkGate(dirs []PrivateDir, host sandbox.Host) error {
	for _, d := range dirs {
		if d.For == sandbox.GateBinDir {
			if err := os.Symlink(host.Init, filepath.Join(d.Host, "cordon")); err != nil {
				return fmt.Errorf("gate binary: %w", err)
			}
		}
	}
	return nil
}

// writeSecrets creates dir (0700, which must not exist) and writes each file in it,
// mode 0400, created exclusively (O_EXCL: never through a symbolic link).
func writeSecrets(dir string, files []sandbox.SecretFile) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("credential files: %w", err)
	}
	for _, sf := range files {
		if sf.Name == "" || strings.ContainsAny(sf.Name, "/\x00") || sf.Name == "." || sf.Name == ".." {
			return fmt.Errorf("credential files: bad name %q", sf.Name)
		}
		f, err := os.OpenFile(filepath.Join(dir, sf.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
		if err != nil {
			return fmt.Errorf("credential file %s: %w", sf.Name, err)
		}
		_, err = f.WriteString(sf.Value.Reveal())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("credential file %s: %w", sf.Name, err)
		}
	}
	return nil
}
