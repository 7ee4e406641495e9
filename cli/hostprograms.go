package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds/command"
	"github.com/cordonhq/cordon/creds/providers"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// hostProgram is one program the host runs because the contract names it, as
// `cordon explain` shows it.
type hostProgram struct {
	For          string   `json:"for"`   // "credentials NAME mint", "gate NAME"
	Named        string   `json:"named"` // as the contract names it
	Path         string   `json:"path,omitempty"`
	Interpreters []string `json:"interpreters,omitempty"`
	Loader       string   `json:"loader,omitempty"`
	Why          string   `json:"why"` // why it may run, or why it is not there
	where        contract.Pos
}

// hostPrograms resolves and checks (package hostexec) every program the host will
// run for plan: each exec credential's mint and revoke commands and each gate's
// program. A program the checks refuse is a contract problem at the entry naming it;
// one not on this host is listed as such (the run fails when it is needed).
func hostPrograms(plan *contract.Plan) ([]hostProgram, error) {
	pol := hostexec.PolicyOf(plan.HostWritable())
	var out []hostProgram
	var errs []error
	add := func(what, name, path string, pos contract.Pos) {
		hp := hostProgram{For: what, Named: name, where: pos}
		p, err := hostexec.Resolve(name, path, pol)
		switch {
		case err == nil:
			hp.Path, hp.Interpreters, hp.Loader, hp.Why = p.Path(), p.Interpreters(), p.Chain[len(p.Chain)-1].Loader, p.Why()
			p.Close()
		case errors.Is(err, os.ErrNotExist):
			hp.Why = "not found on this host (in PATH " + path + "); it is checked again when it runs"
		default:
			errs = append(errs, &contract.Error{File: plan.ContractFile, Pos: pos, Msg: fmt.Sprintf("%s: %v", what, err)})
			hp.Why = "refused: " + err.Error()
		}
		out = append(out, hp)
	}
	credPath := command.HostPath(os.Getenv("PATH"), pol)
	for _, c := range append(append([]contract.Credential{}, plan.Credentials...), plan.GateCredentials()...) {
		if c.Provider != providers.Exec {
			continue
		}
		mint, revoke := command.Commands(c)
		for i, argv := range [][]string{mint, revoke} {
			if len(argv) > 0 && argv[0] != "" {
				add(fmt.Sprintf("credentials %s: scope.%s", c.Name, []string{"mint", "revoke"}[i]), argv[0], credPath, c.Pos)
			}
		}
	}
	for _, g := range plan.Gates {
		if argv, err := g.Argv("run"); err == nil && len(argv) > 0 && argv[0] != "" {
			add("gate "+g.Name, argv[0], contract.DefaultPath, g.Pos)
		}
	}
	return out, errors.Join(errs...)
}
