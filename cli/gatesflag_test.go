package cli

import (
	"io"
	"testing"

	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/gate"
)

// TestGatesFlagDefaults: nobody is there to ask under CI, so gates default to deny; a
// bad $CORDON_GATES never loosens that; the flag still overrides.
func TestGatesFlagDefaults(t *testing.T) {
	for _, c := range []struct {
		ci, env string
		args    []string
		want    gate.Mode
	}{
		{"", "", nil, gate.Ask},
		{"true", "", nil, gate.DenyAll},
		{"true", "ask", nil, gate.Ask},
		{"", "deny", nil, gate.DenyAll},
		{"", "bogus", nil, gate.DenyAll},
		{"true", "", []string{"--gates", "ask"}, gate.Ask},
	} {
		t.Setenv("CI", c.ci)
		t.Setenv("CORDON_GATES", c.env)
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		m := gatesFlag(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if *m != c.want {
			t.Errorf("CI=%q CORDON_GATES=%q %v: got %v, want %v", c.ci, c.env, c.args, *m, c.want)
		}
	}
}
