package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/contract"
)

// explainJSONVersion versions `cordon explain --json` (explain_version, kept beside
// its schema).
const explainJSONVersion = 1

// explainOptions are cordon explain's flags.
type explainOptions struct {
	file, auditDir, backend string
	asJSON                  bool
	// placement is "local" (the backend's sandbox) or "kubernetes" (the objects of
	// explain_placement.go), placementConfig the kubernetes placement's config file.
	placement, placementConfig string
}

func newExplainCmd(stdio IO) *cobra.Command {
	var o explainOptions
	c := &cobra.Command{
		Use:   "explain [flags]",
		Short: "print the compiled plan of a contract",
		Long: `Prints the plan the contract compiles to on this host, the same plan run runs: every
mount and why, the environment's names, the egress rules, limits, monitor, credentials and
gates, then how the backend builds the sandbox from it.

Exit status: 0, 1 when the contract is invalid (one line per problem on stderr) or the
placement cannot run it, 2 usage error.`,
		Example: `  cordon explain
  cordon explain -c cordon.yaml --backend docker
  cordon explain --json | jq '.plan.mounts[] | select(.access == "rw") | .path'
  cordon explain --placement kubernetes --placement-config k8s.yaml | kubectl apply --dry-run=server -f -`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error { return explainCmd(stdio, o) },
	}
	f := c.Flags()
	contractFlag(f, &o.file)
	auditDirFlag(f, &o.auditDir)
	o.backend = envOr("CORDON_BACKEND", "auto")
	f.Var((*backendName)(&o.backend), "backend", "show how `backend` B would build the sandbox: auto, bwrap, docker, containerd, seatbelt ($CORDON_BACKEND)")
	f.BoolVar(&o.asJSON, "json", false, `print {"schema": "`+schemaExplain+`", "explain_version": 1, "plan": {...}}`)
	f.StringVar(&o.placement, "placement", "local", "where a session would run: local (the backend's sandbox), or kubernetes (print the objects it would create, as YAML)")
	f.StringVar(&o.placementConfig, "placement-config", "", "the kubernetes placement's config `file` (version: 1, namespace, initImage, runtimeClass, ...); without it, an example namespace and image")
	return c
}

func explainCmd(stdio IO, o explainOptions) error {
	switch {
	case o.placement != "local" && o.placement != "kubernetes":
		return errdefs.Usagef("--placement %q: want local or kubernetes", o.placement)
	case o.placement == "kubernetes" && o.asJSON:
		return errdefs.Usagef("--placement kubernetes prints YAML; leave out --json")
	case o.placementConfig != "" && o.placement != "kubernetes":
		return errdefs.Usagef("--placement-config is the kubernetes placement's; add --placement kubernetes")
	}
	plan, _, err := planOf(o.file, o.auditDir, nil)
	if err != nil {
		for _, line := range problems(err) {
			fmt.Fprintln(stdio.Stderr, line)
		}
		return errdefs.Exit(errdefs.ExitFailure)
	}
	if o.placement == "kubernetes" {
		return explainKubernetes(stdio.Stdout, plan, o.placementConfig) // explain_placement*.go
	}
	progs, _ := hostPrograms(plan) // planOf refused any it refuses
	if o.asJSON {
		return writeJSON(stdio.Stdout, struct {
			Schema   string         `json:"schema"`
			Version  int            `json:"explain_version"`
			Plan     *contract.Plan `json:"plan"`
			Programs []hostProgram  `json:"host_programs"` // what the host runs for the contract
		}{schemaExplain, explainJSONVersion, plan, progs})
	}
	writePlan(stdio.Stdout, plan)
	writeHostPrograms(stdio.Stdout, progs)
	for _, n := range plan.Notes {
		fmt.Fprintf(stdio.Stdout, "note: %s\n", n)
	}
	explainBackend(stdio.Stdout, o.backend, plan)
	return nil
}

// writeHostPrograms lists the programs the host runs because the contract names them,
// and why each may.
func writeHostPrograms(w io.Writer, progs []hostProgram) {
	if len(progs) == 0 {
		fmt.Fprintf(w, "\nHost programs: none (the host runs nothing the contract names)\n")
		return
	}
	fmt.Fprintf(w, "\nHost programs (run outside the sandbox, through the file checked):\n")
	for _, p := range progs {
		fmt.Fprintf(w, "  %s: %s", p.For, p.Named)
		if p.Path != "" && p.Path != p.Named {
			fmt.Fprintf(w, " -> %s", p.Path)
		}
		for _, i := range p.Interpreters {
			fmt.Fprintf(w, ", interpreter %s", i)
		}
		if p.Loader != "" {
			fmt.Fprintf(w, ", loader %s", p.Loader)
		}
		fmt.Fprintf(w, "\n    %s\n", p.Why)
	}
}

// explainer is a backend that can say how it builds the sandbox from a plan.
type explainer interface {
	Explain(plan *contract.Plan) string
}

// explainBackend prints what the backend named (bwrap for "auto") says of how it builds
// the sandbox from plan; nothing for a backend this build or host lacks.
func explainBackend(w io.Writer, name string, plan *contract.Plan) {
	if name == "auto" {
		name = "bwrap"
	}
	for _, b := range knownBackends() {
		if e, ok := b.backend.(explainer); ok && b.name == name {
			fmt.Fprintf(w, "\n%s\n", e.Explain(plan))
		}
	}
}

// writePlan prints a plan for people.
func writePlan(w io.Writer, p *contract.Plan) {
	src := p.ContractFile
	if src == "" {
		src = "built-in default contract"
	}
	fmt.Fprintf(w, "contract   %s (%s)\n", src, p.ContractDigest)
	fmt.Fprintf(w, "workspace  %s\nworkdir    %s\nhome       %s (empty, private)\n", p.Workspace, p.Workdir, p.Home)
	if p.Image != "" {
		fmt.Fprintf(w, "image      %s (pull: %s; container backends only)\n", p.Image, p.Pull)
	}
	fmt.Fprintf(w, "\nFile system (everything not listed is invisible):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ACCESS\tPATH\tWHY")
	for _, m := range p.Mounts {
		access := m.Access.String()
		switch {
		case m.Type == contract.Tmpfs:
			access += " (tmpfs)"
		case m.Create == contract.PlaceholderParent:
			access += " (made for the run)"
		case m.Create != contract.NoPlaceholder:
			access += " (absent; kept absent)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", access, m.Path, m.Why)
	}
	for _, l := range p.Links {
		fmt.Fprintf(tw, "  link\t%s -> %s\t@system\n", l.Path, l.Target)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nEnvironment (built from nothing; values not shown):\n")
	for _, e := range p.Env {
		fmt.Fprintf(w, "  %s (%s)\n", e.Name, e.Source)
	}
	fmt.Fprintf(w, "\nNetwork: ")
	if len(p.Egress) == 0 {
		fmt.Fprintln(w, "none (loopback only; egress denied)")
	} else {
		fmt.Fprintln(w, "egress allowed only to:")
		for _, r := range p.Egress {
			target := r.Host
			if target == "" {
				target = r.CIDR.String()
			}
			fmt.Fprintf(w, "  %s ports %v  %s\n", target, r.Ports, r.Why)
		}
	}
	fmt.Fprintf(w, "\nCommands: timeout %s per command", p.Timeout.String())
	if len(p.Deny) > 0 {
		var pats []string
		for _, d := range p.Deny {
			pats = append(pats, fmt.Sprintf("%q", d.Pattern))
		}
		fmt.Fprintf(w, "; denied: %s", strings.Join(pats, ", "))
	}
	fmt.Fprintln(w)
	l := p.Limits
	if l.Any() {
		fmt.Fprintf(w, "Limits: memory %d bytes, pids %d, cpu %g (0 = unlimited)\n", l.Memory, l.Pids, l.CPU)
	} else {
		fmt.Fprintln(w, "Limits: none")
	}
	d := l.Diff
	fmt.Fprintf(w, "Diff bounds (limits.diff): %d entries, hash %d bytes a file and %d a snapshot, "+
		"patch %d bytes a command and %d a run, %s\n", d.Entries, d.HashFile, d.HashTotal, d.Patch, d.PatchRun, d.Time)
	fmt.Fprintf(w, "Monitor: %s\n", p.Monitor.Mode)
	fmt.Fprintf(w, "Credentials: %d\n", len(p.Credentials))
	for _, g := range p.Gates {
		cred := ""
		if g.Credential != nil {
			cred = ", credential " + g.Credential.Name + " (minted per approval)"
		}
		fmt.Fprintf(w, "Gate %s: %s (approve: %s, timeout %s%s): %s\n", g.Name, strings.Join(g.Run, " "), g.Approve, g.Timeout, cred, g.Why)
	}
	for _, wd := range p.Widenings {
		fmt.Fprintf(w, "Widening: %s %s at %s: %s\n", wd.Path, wd.Access, wd.Where, wd.Why)
	}
}
