package cli

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/runner/seatbelt"
)

// backendInfo is one backend cordon knows of, built or not.
type backendInfo struct {
	name    string
	backend sandbox.Backend // nil: not available in this build
	why     string          // why it is not available in this build
	// needsImage: --backend auto picks it only for a contract that names an image
	// (container backends: bwrap's host view is preferred).
	needsImage bool
	// named: --backend auto never picks it; it runs only when asked for by name (the
	// kubernetes placement, which needs its config and a cluster).
	named bool
	// reexec: this build lacks the backend; choosing it replaces the process with
	// cordon-engines (backends_engines_linux.go).
	reexec bool
}

// describer is a backend that can say which engine answers.
type describer interface {
	Describe(ctx context.Context) string
}

// collector is a backend that leaves engine objects behind when cordon is killed, and
// removes those of runs whose cordon is gone.
type collector interface {
	Name() string
	GC(ctx context.Context) ([]string, error)
}

func knownBackends() []backendInfo {
	out := []backendInfo{{name: "bwrap", backend: newBwrap()}}
	out = append(out, containerBackends()...) // backends_containers_*.go
	// seatbelt's Check says why it cannot run here; its profile is shown on any host.
	out = append(out, backendInfo{name: "seatbelt", backend: &seatbelt.Backend{}})
	if runtime.GOOS != "linux" {
		out[0] = backendInfo{name: "bwrap", why: "Linux only"}
	}
	return out
}

// selectBackend returns the named backend, or for "auto" the first usable one.
func selectBackend(ctx context.Context, name string, plan *contract.Plan) (sandbox.Backend, error) {
	var reasons []error
	for _, b := range knownBackends() {
		if name != "auto" && name != b.name {
			continue
		}
		if name == "auto" && b.named {
			continue
		}
		if name == "auto" && b.needsImage && plan.Image == "" {
			reasons = append(reasons, fmt.Errorf("%s: --backend auto uses it only for a contract that names an image (or choose it with --backend %[1]s)", b.name))
			continue
		}
		if b.reexec {
			// Nothing has started yet (gc and compile are idempotent): run the whole
			// command again in the build that has the engines.
			reasons = append(reasons, fmt.Errorf("%s: %w", b.name, execEngines()))
			continue
		}
		if b.backend == nil {
			reasons = append(reasons, fmt.Errorf("%s: %s", b.name, b.why))
			continue
		}
		err := b.backend.Check(ctx)
		if err == nil {
			return b.backend, nil
		}
		reasons = append(reasons, err)
	}
	if len(reasons) == 0 {
		return nil, errdefs.Invalidf("unknown backend %q (want auto, bwrap, docker, containerd, kubernetes or seatbelt)", name)
	}
	return nil, errdefs.Unavailablef("no usable sandbox backend, refusing to run unsandboxed: %w", errors.Join(reasons...))
}

func newBackendsCmd(stdio IO) *cobra.Command {
	var file string
	var asJSON bool
	c := &cobra.Command{
		Use:   "backends [flags]",
		Short: "list sandbox backends and whether they work here",
		Long: `Lists the sandbox backends this cordon knows, whether each works on this host (and why
not), and which one --backend auto picks for the contract.`,
		Example: `  cordon backends
  cordon backends -c cordon.yaml --json | jq -r '.backends[] | select(.chosen) | .name'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error { return backendsCmd(c.Context(), stdio, file, asJSON) },
	}
	contractFlag(c.Flags(), &file)
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaBackends+`", "backends": [{name, available, detail, chosen}]}`)
	return c
}

// backendJSON is one backend in `cordon backends --json`.
type backendJSON struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"` // "ready: ...", or why it is unavailable
	Chosen    bool   `json:"chosen"` // what --backend auto picks for the contract
}

func backendsCmd(ctx context.Context, stdio IO, file string, asJSON bool) error {
	image := ""
	if c, err := loadContract(file); err == nil {
		image = c.Image
	}
	var out []backendJSON
	chosen := false
	for _, b := range knownBackends() {
		j := backendJSON{Name: b.name, Detail: b.why}
		if b.backend != nil {
			if err := b.backend.Check(ctx); err != nil {
				j.Detail = errdefs.Message(err)
			} else {
				j.Available, j.Detail = true, "ready"
				if d, ok := b.backend.(describer); ok {
					j.Detail = "ready: " + d.Describe(ctx)
				}
				switch {
				case b.named:
					j.Detail += "; only with --backend " + b.name
				case !chosen && (!b.needsImage || image != ""):
					chosen, j.Chosen = true, true
					j.Detail += "; chosen by --backend auto"
				case b.needsImage && image == "":
					j.Detail += "; --backend auto uses it only when bwrap is unusable and the contract names an image"
				}
			}
		}
		out = append(out, j)
	}
	if asJSON {
		return writeJSON(stdio.Stdout, struct {
			Schema   string        `json:"schema"`
			Backends []backendJSON `json:"backends"`
		}{schemaBackends, out})
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tSTATUS\tDETAIL")
	for _, b := range out {
		status := "unavailable"
		if b.Available {
			status = "available"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Name, status, b.Detail)
	}
	return tw.Flush()
}
