package cli

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/gate"
)

// gatesFlag adds --gates: how approval gates are decided. The default is ask (a person
// runs `cordon gate approve`), except under CI=true, where nobody is there to ask: deny.
// $CORDON_GATES overrides the default.
func gatesFlag(fs *pflag.FlagSet) *gate.Mode {
	m := gate.ModeFromEnv(os.Getenv)
	fs.Var(modeValue{&m}, "gates", "how approval `gates` are decided: ask (a person runs cordon gate approve) or deny (refused at once); default deny under CI=true, else ask ($CORDON_GATES)")
	return &m
}

// modeValue is a [gate.Mode] as a pflag.Value.
type modeValue struct{ *gate.Mode }

func (modeValue) Type() string { return "ask|deny" }
