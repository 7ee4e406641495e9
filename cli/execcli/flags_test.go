package execcli

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestParseArgs: exec's flags go before or after SESSION and end at CMD.
func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		id   string
		argv []string
		o    options
	}{
		{"dash", []string{"ID", "--", "echo", "hi"}, "ID", []string{"echo", "hi"}, options{capN: -1}},
		{"after id", []string{"ID", "--json", "--", "echo"}, "ID", []string{"echo"}, options{capN: -1, asJSON: true}},
		{"before id", []string{"--json", "ID", "--", "echo"}, "ID", []string{"echo"}, options{capN: -1, asJSON: true}},
		{"both sides", []string{"--json", "ID", "--timeout", "1s", "echo"}, "ID", []string{"echo"}, options{capN: -1, asJSON: true, timeout: time.Second}},
		{"command's flag", []string{"ID", "echo", "--json"}, "ID", []string{"echo", "--json"}, options{capN: -1}},
		{"after dash", []string{"ID", "--", "--json"}, "ID", []string{"--json"}, options{capN: -1}},
		{"dash before id", []string{"--", "ID", "--json", "-v"}, "ID", []string{"--json", "-v"}, options{capN: -1}},
		{"short", []string{"-i", "ID", "sh", "-c", "cat"}, "ID", []string{"sh", "-c", "cat"}, options{capN: -1, stdin: true}},
		{"equals", []string{"ID", "--cap=0x10", "--dir=/w", "-i=false", "true"}, "ID", []string{"true"}, options{capN: 16, dir: "/w"}},
		{"later wins", []string{"--cap", "5", "ID", "--cap", "7", "true"}, "ID", []string{"true"}, options{capN: 7}},
		{"lone dash", []string{"ID", "-", "x"}, "ID", []string{"-", "x"}, options{capN: -1}},
		{"no command", []string{"ID"}, "ID", nil, options{capN: -1}},
		{"help", []string{"ID", "-ih"}, "", nil, options{capN: -1, stdin: true, help: true}},
		{"help false", []string{"--help=false", "ID", "true"}, "ID", []string{"true"}, options{capN: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, id, argv, err := parseArgs(tt.args)
			if err != nil {
				t.Fatalf("parseArgs(%q): %v", tt.args, err)
			}
			if id != tt.id || !slices.Equal(argv, tt.argv) || o != tt.o {
				t.Errorf("parseArgs(%q) = %+v %q %q; want %+v %q %q", tt.args, o, id, argv, tt.o, tt.id, tt.argv)
			}
		})
	}
}

// TestParseErrorsArePflags: a bad flag gets the message cobra's pflag gave it when
// cordon exec was parsed by cobra, word for word.
func TestParseErrorsArePflags(t *testing.T) {
	for _, args := range [][]string{
		{"--nope", "ID", "true"},
		{"ID", "--nope", "true"},
		{"-x", "ID"},
		{"-ix", "ID"},
		{"ID", "--timeout"},
		{"ID", "--timeout", "soon", "true"},
		{"ID", "--cap", "many", "true"},
		{"ID", "--json=maybe", "true"},
		{"ID", "-i=maybe", "true"},
		{"---x", "ID"},
		{"--=x", "ID"},
	} {
		_, _, _, err := parseArgs(args)
		want := pflagParse(args)
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("parseArgs(%q): %v; pflag: %v", args, err, want)
		}
	}
}

// pflagParse parses args as cordon exec did with cobra: the flags before SESSION, then
// those between SESSION and CMD.
func pflagParse(args []string) error {
	f := pflag.NewFlagSet("exec", pflag.ContinueOnError)
	f.SetOutput(nopWriter{})
	f.SetInterspersed(false)
	f.Duration("timeout", 0, "")
	f.String("dir", "", "")
	f.Bool("json", false, "")
	f.Int("cap", -1, "")
	f.BoolP("interactive", "i", false, "")
	f.BoolP("help", "h", false, "")
	if err := f.Parse(args); err != nil {
		return err
	}
	if rest := f.Args(); f.ArgsLenAtDash() < 0 && len(rest) > 1 {
		return f.Parse(rest[1:])
	}
	return errors.New("parsed")
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

func TestSessionNext(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{nil, true}, {[]string{"--json"}, true}, {[]string{"--"}, true}, {[]string{"--dir"}, false},
		{[]string{"--dir", "/w"}, true}, {[]string{"ID"}, false}, {[]string{"--json", "ID", "x"}, false},
	} {
		if got := SessionNext(tt.args); got != tt.want {
			t.Errorf("SessionNext(%q) = %v; want %v", tt.args, got, tt.want)
		}
	}
}
