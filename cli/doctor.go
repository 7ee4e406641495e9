package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// postureBinary is where every backend mounts cordon's init binary in the sandbox.
const postureBinary = paths.SandboxInit

// doctorVersion is the version of `cordon doctor --json`.
const doctorVersion = 1

// doctorReport is `cordon doctor --json`.
type doctorReport struct {
	// Schema is schemaDoctor.
	Schema string `json:"schema"`
	// Version is doctorVersion.
	Version int `json:"version"`
	// Backends are the backends measured (or skipped), in `cordon backends` order.
	Backends []doctorBackend `json:"backends"`
}

// doctorBackend is one backend's posture.
type doctorBackend struct {
	// Backend is the backend's name.
	Backend string `json:"backend"`
	// View is what the sandbox's root is: "host view", or "image NAME".
	View string `json:"view,omitempty"`
	// OK is true when the sandbox was built and every check passed.
	OK bool `json:"ok"`
	// Skipped says why an unusable backend was not measured (no --backend given).
	Skipped string `json:"skipped,omitempty"`
	// Error says why the sandbox could not be built, or its posture not read.
	Error string `json:"error,omitempty"`
	// Checks are the posture's checks, as `cordon internal posture` measured them.
	Checks []wire.PostureCheck `json:"checks,omitempty"`
}

func (b doctorBackend) failed() int {
	n := 0
	for _, c := range b.Checks {
		if !c.OK {
			n++
		}
	}
	return n
}

// doctorOptions are doctor's flags.
type doctorOptions struct {
	file, backend string
	asJSON        bool
	// placement is "local" (each backend here) or "kubernetes" (a Pod of the
	// placement, doctor_placement.go), with its config and the cluster's kubeconfig.
	placement, placementConfig, kubeconfig string
}

func newDoctorCmd(stdio IO) *cobra.Command {
	var o doctorOptions
	c := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "measure each backend's sandbox from inside: what a command can reach",
		Long: `Runs cordon's posture check inside a sandbox of each backend usable here (or of
--backend), through the same path as run, and prints what a command inside can reach.
With --placement kubernetes it measures a session's Pod on the cluster instead: the Pod
the kubernetes placement creates for the contract (cordon explain --placement
kubernetes prints it), process 1 attached through the API server, the check run as a
session's command; the Pod is deleted afterwards.

Exit status: 0 every check passed on every backend measured, 1 a check failed, 125 a
sandbox could not be built (or no backend is usable), 2 usage error.`,
		Example: `  cordon doctor
  cordon doctor --backend docker -c cordon.yaml
  cordon doctor --json | jq '.backends[] | {backend, ok}'
  cordon doctor --placement kubernetes --placement-config k8s.yaml --kubeconfig ~/.kube/config`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return errdefs.Usagef("doctor: no arguments expected")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			if o.placement == "kubernetes" {
				return doctorPlacement(c.Context(), stdio, o) // doctor_placement*.go
			}
			return doctorCmd(c.Context(), stdio, o.file, o.backend, o.asJSON)
		},
	}
	f := c.Flags()
	contractFlag(f, &o.file)
	f.StringVar(&o.backend, "backend", "", "measure only this sandbox `backend` (default: every backend usable here)")
	f.BoolVar(&o.asJSON, "json", false, `print {"schema": "`+schemaDoctor+`", "version": 1, "backends": [...]}`)
	f.StringVar(&o.placement, "placement", "local", "where to measure: local (the backends here) or kubernetes (a session's Pod on the cluster)")
	f.StringVar(&o.placementConfig, "placement-config", "", "the kubernetes placement's config `file` (version: 1, namespace, initImage, ...); required with --placement kubernetes")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "the cluster's kubeconfig `file` (default: in a Pod its ServiceAccount, else $KUBECONFIG or ~/.kube/config)")
	return c
}

// check refuses flags that do not go together.
func (o doctorOptions) check() error {
	switch {
	case o.placement != "local" && o.placement != "kubernetes":
		return errdefs.Usagef("--placement %q: want local or kubernetes", o.placement)
	case o.placement == "kubernetes" && o.backend != "":
		return errdefs.Usagef("--backend is the local placement's; a Pod's runtime is the placement config's runtimeClass")
	case o.placement == "kubernetes" && o.placementConfig == "":
		return errdefs.Usagef("--placement kubernetes needs --placement-config (the namespace and cordon's image to use)")
	case o.placement != "kubernetes" && (o.placementConfig != "" || o.kubeconfig != ""):
		return errdefs.Usagef("--placement-config and --kubeconfig are the kubernetes placement's; add --placement kubernetes")
	}
	return nil
}

// doctorCmd runs `cordon internal posture` inside a sandbox of each backend, through
// the same runner.Run as `cordon run`, and prints what it measured. Exit status: 0
// when every check passed on every backend measured, 1 when one failed, else 125 when
// a sandbox could not be built (or no backend is usable).
func doctorCmd(ctx context.Context, stdio IO, file, name string, asJSON bool) error {
	root, err := auditRoot(envOr("CORDON_AUDIT_DIR", ""))
	if err != nil {
		return reportRunError(stdio, err)
	}
	plan, _, err := planOf(file, root, nil)
	if err != nil {
		return reportRunError(stdio, err)
	}
	// Each backend's result, measured or skipped, by name.
	results := map[string]doctorBackend{}
	var backends []namedBackend
	if name != "" {
		b, err := selectBackend(ctx, name, plan)
		if err != nil {
			return reportRunError(stdio, err)
		}
		backends = append(backends, namedBackend{name, b})
	} else {
		for _, b := range knownBackends() {
			why := b.why
			if b.backend != nil {
				err := b.backend.Check(ctx)
				if err == nil {
					backends = append(backends, namedBackend{b.name, b.backend})
					continue
				}
				why = errdefs.Message(err)
			}
			results[b.name] = doctorBackend{Backend: b.name, Skipped: why}
		}
	}
	for _, b := range backends {
		d := postureOf(ctx, plan, root, b.backend)
		d.Backend, d.View = b.name, "host view"
		if plan.Image != "" && b.name != "bwrap" { // bwrap has no image: always the host view
			d.View = "image " + plan.Image
		}
		results[b.name] = d
	}
	report := doctorReport{Schema: schemaDoctor, Version: doctorVersion}
	for _, b := range knownBackends() { // in `cordon backends` order
		if d, ok := results[b.name]; ok {
			report.Backends = append(report.Backends, d)
		}
	}
	printDoctor(stdio, report, asJSON)
	if len(backends) == 0 {
		return errdefs.Unavailablef("doctor: no usable sandbox backend")
	}
	return doctorExit(report)
}

type namedBackend struct {
	name    string
	backend sandbox.Backend
}

// postureOf runs the posture command in a sandbox of b built from plan.
func postureOf(ctx context.Context, plan *contract.Plan, auditRoot string, b sandbox.Backend) doctorBackend {
	var stdout, stderr bytes.Buffer
	res, err := runner.Run(ctx, plan, postureArgv(plan.Writable()), runner.Options{
		Backend: b, Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		AuditRoot: auditRoot, Version: Version, Gates: gate.DenyAll, Secrets: scrubbedSecrets(plan),
	})
	if err != nil {
		return doctorBackend{Error: errdefs.Message(err)}
	}
	return decodePosture(&stdout, stderr.String(), res.ExitCode)
}

// postureArgv is the posture command, told which paths the sandbox may write.
func postureArgv(writable []string) []string {
	argv := []string{postureBinary, "internal", wire.PostureArg}
	for _, w := range writable {
		argv = append(argv, "--writable", w)
	}
	return argv
}

// decodePosture is the result of a posture command that exited code, printing stdout
// and stderr.
func decodePosture(stdout io.Reader, stderr string, code int) doctorBackend {
	var p wire.Posture
	dec := json.NewDecoder(stdout)
	dec.DisallowUnknownFields()
	if derr := dec.Decode(&p); derr != nil || p.Version != wire.PostureVersion || (code != 0 && code != 1) {
		msg := fmt.Sprintf("the posture command exited %d", code)
		if derr == nil && p.Version != wire.PostureVersion {
			msg += fmt.Sprintf(" with posture version %d (want %d)", p.Version, wire.PostureVersion)
		}
		if s := strings.TrimSpace(stderr); s != "" {
			msg += ": " + s
		}
		return doctorBackend{Error: msg}
	}
	return doctorBackend{OK: p.OK(), Checks: p.Checks}
}

// doctorExit: a failed check (1) wins over a sandbox that could not be built (125):
// it is a hole in one that could.
func doctorExit(r doctorReport) error {
	code := 0
	for _, b := range r.Backends {
		switch {
		case b.Skipped != "":
		case b.Error != "" && code == 0:
			code = errdefs.ExitCannotRun
		case b.Error == "" && !b.OK:
			code = errdefs.ExitFailure
		}
	}
	if code == 0 {
		return nil
	}
	return errdefs.Exit(code)
}

func printDoctor(stdio IO, r doctorReport, asJSON bool) {
	if asJSON {
		out, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintf(stdio.Stdout, "%s\n", out)
		return
	}
	for i, b := range r.Backends {
		if i > 0 {
			fmt.Fprintln(stdio.Stdout)
		}
		writePosture(stdio.Stdout, b)
	}
}

// maxGot is the width of the table's GOT column; the whole value is in the failure
// details below the table, and in --json.
const maxGot = 60

// writePosture prints one backend's posture as a table, then each failure in full.
func writePosture(w io.Writer, b doctorBackend) {
	switch {
	case b.Skipped != "":
		fmt.Fprintf(w, "%s: skipped: %s\n", b.Backend, b.Skipped)
		return
	case b.Error != "":
		fmt.Fprintf(w, "%s (%s): the sandbox could not be built: %s\n", b.Backend, b.View, b.Error)
		return
	}
	fmt.Fprintf(w, "%s (%s)\n", b.Backend, b.View)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tWANT\tGOT\tOK")
	for _, c := range b.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Want, clip(strings.ReplaceAll(c.Got, "\n", " "), maxGot), okWord(c.OK))
	}
	_ = tw.Flush()
	n := b.failed()
	if n == 0 {
		fmt.Fprintf(w, "%s: all %d checks ok\n", b.Backend, len(b.Checks))
		return
	}
	fmt.Fprintf(w, "%s: %d of %d checks FAIL\n", b.Backend, n, len(b.Checks))
	for _, c := range b.Checks {
		if !c.OK {
			fmt.Fprintf(w, "  FAIL %s: want %s, got %s", c.Name, c.Want, c.Got)
			if c.Detail != "" {
				fmt.Fprintf(w, " (%s)", c.Detail)
			}
			fmt.Fprintln(w)
		}
	}
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}
