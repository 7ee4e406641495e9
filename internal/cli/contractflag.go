package cli

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// DefaultContractFile is read from the current directory when -c is not given.
const DefaultContractFile = contract.ContractName

// contractFlag adds -c to a command.
func contractFlag(fs *flag.FlagSet) *string {
	return fs.String("c", "", "contract `FILE` (default ./cordon.yaml if present, else the built-in default contract)")
}

// loadContract reads the contract named by -c, ./cordon.yaml, or the built-in default.
func loadContract(file string) (*contract.Contract, error) {
	if file == "" {
		if _, err := os.Stat(DefaultContractFile); err == nil {
			file = DefaultContractFile
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %v", errdefs.ErrInvalid, err)
		} else {
			return contract.Default(), nil
		}
	}
	c, err := contract.Load(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	return c, nil
}

// compile loads and compiles the contract, protecting the given host paths.
func compile(file string, protect ...string) (*contract.Plan, *contract.Contract, error) {
	c, err := loadContract(file)
	if err != nil {
		return nil, nil, err
	}
	h, err := contract.HostFromOS()
	if err != nil {
		return nil, nil, err
	}
	h.Protect = protect
	p, err := contract.Compile(c, h)
	if err != nil {
		return nil, c, fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	return p, c, nil
}
