//go:build !noengines || !linux

package cli

import (
	"fmt"
	"io"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// explainSession is who `cordon explain --placement kubernetes` compiles for: the
// server names real sessions; the example's names are fixed, so the output is too.
var explainSession = podspec.Session{Tenant: "example", ID: "explain"}

// exampleConfig is the kubernetes placement's config when explain is given none.
func exampleConfig() podspec.Config {
	return podspec.Config{Namespace: "cordon-example", InitImage: "cordon-init:" + Version}
}

// explainKubernetes prints the objects the kubernetes placement would create for a
// session of plan, as YAML, in creation order: the same contract and config print
// the same bytes.
func explainKubernetes(w io.Writer, plan *contract.Plan, configFile string) error {
	cfg := exampleConfig()
	if configFile != "" {
		var err error
		if cfg, err = podspec.ReadConfig(configFile); err != nil {
			return failed(err)
		}
	}
	objs, err := podspec.Compile(plan, explainSession, cfg)
	if err != nil {
		return failed(err)
	}
	out, err := objs.YAML()
	if err != nil {
		return err
	}
	src := plan.ContractFile
	if src == "" {
		src = "the built-in default contract"
	}
	fmt.Fprintf(w, "# The objects the kubernetes placement creates for a session of %s (%s),\n", src, plan.ContractDigest)
	fmt.Fprintf(w, "# tenant %q, session %q, in this order.\n", explainSession.Tenant, explainSession.ID)
	_, err = w.Write(out)
	return err
}

// failed is explain's status 1 (the contract or config cannot be placed) with why.
func failed(err error) error { return &errdefs.Status{Code: errdefs.ExitFailure, Err: err} }
