package execcli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is the type of a flag's value.
type Kind int

// The kinds of exec's flags.
const (
	Bool Kind = iota
	Duration
	String
	Int
)

// Flag is one of exec's flags. [Flags] is the one table both `cordon exec` (its help,
// man page and completion, through cobra) and cordon-exec parse and describe.
type Flag struct {
	Name, Short string
	Kind        Kind
	Default     string // as help shows it; Int flags parse it ("-1")
	Usage       string // a `NAME` in back quotes names the value in help
	remote      bool   // names a server (--host and its companions)
	set         func(o *options, v string) error
}

// options are exec's parsed flags.
type options struct {
	timeout time.Duration
	dir     string
	asJSON  bool
	capN    int
	stdin   bool
	trace   string
	help    bool
	remote  Remote
}

// Flags are exec's flags, in the order help lists them. -h/--help is the last.
var Flags = []Flag{
	{Name: "timeout", Kind: Duration, Default: "0s", Usage: "per-command timeout, overriding commands.timeout",
		set: func(o *options, v string) (err error) { o.timeout, err = time.ParseDuration(v); return err }},
	{Name: "dir", Kind: String, Usage: "working `DIR` inside (default: the current directory when it is in the workspace, else the contract's workdir)",
		set: func(o *options, v string) error { o.dir = v; return nil }},
	{Name: "json", Kind: Bool, Default: "false", Usage: "print one JSON object {schema, v, exit_code, stdout, stderr, truncated, spill_path, duration_ms, diffstat, denied_egress, denied, ...} and exit 0 unless cordon failed",
		set: func(o *options, v string) (err error) { o.asJSON, err = strconv.ParseBool(v); return err }},
	{Name: "cap", Kind: Int, Default: "-1", Usage: "keep at most `N` characters of each of stdout and stderr; the whole output goes to a spill file inside the sandbox, named on the last line (default 10000 with --json, else no cap; 0: no cap)",
		set: func(o *options, v string) error {
			n, err := strconv.ParseInt(v, 0, 64)
			o.capN = int(n)
			return err
		}},
	{Name: "interactive", Short: "i", Kind: Bool, Default: "false", Usage: "forward standard input to the command (default: it reads an empty stdin)",
		set: func(o *options, v string) (err error) { o.stdin, err = strconv.ParseBool(v); return err }},
	{Name: "trace", Kind: String, Usage: "append the command's phases (each span's start and end on the critical path) as JSON lines to `FILE` (also $CORDON_TRACE; the supervisor's when the session was started with it)",
		set: func(o *options, v string) error { o.trace = v; return nil }},
	{Name: "host", Kind: String, remote: true, Usage: HostUsage,
		set: func(o *options, v string) error { o.remote.Host = v; return nil }},
	{Name: "token-file", Kind: String, remote: true, Usage: TokenFileUsage,
		set: func(o *options, v string) error { o.remote.TokenFile = v; return nil }},
	{Name: "tls-ca", Kind: String, remote: true, Usage: TLSCAUsage,
		set: func(o *options, v string) error { o.remote.TLSCA = v; return nil }},
	{Name: "tls-cert", Kind: String, remote: true, Usage: TLSCertUsage,
		set: func(o *options, v string) error { o.remote.TLSCert = v; return nil }},
	{Name: "tls-key", Kind: String, remote: true, Usage: TLSKeyUsage,
		set: func(o *options, v string) error { o.remote.TLSKey = v; return nil }},
	{Name: "help", Short: "h", Kind: Bool, Default: "false", Usage: "help for exec",
		set: func(o *options, v string) (err error) { o.help, err = strconv.ParseBool(v); return err }},
}

// parseArgs splits exec's arguments into its flags, SESSION and the command, as
// `[flags] SESSION [flags] [--] CMD [ARGS...]`: flags go before or after SESSION and
// end at CMD's first word or at "--" (as docker exec: the command's flags are its
// own). A "--" before SESSION ends the flags there. The syntax and the error messages
// are pflag's (cobra's), so cordon exec parses as it always has.
func parseArgs(args []string) (o options, id string, argv []string, err error) {
	o.capN = -1
	rest, dashed, err := parseFlags(&o, args)
	if err != nil || o.help {
		return o, "", nil, err
	}
	if len(rest) > 0 {
		id, argv = rest[0], rest[1:]
	}
	if !dashed && len(argv) > 0 {
		if argv, _, err = parseFlags(&o, argv); err != nil || o.help {
			return o, "", nil, err
		}
	}
	return o, id, argv, nil
}

// parseFlags parses flags from args until the first argument that is not one, which
// it returns with the rest, or until "--", which it drops (dashed).
func parseFlags(o *options, args []string) (rest []string, dashed bool, err error) {
	for len(args) > 0 {
		s := args[0]
		switch {
		case len(s) < 2 || s[0] != '-':
			return args, false, nil
		case s == "--":
			return args[1:], true, nil
		case s[1] == '-':
			args, err = parseLong(o, s, args[1:])
		default:
			args, err = parseShort(o, s, args[1:])
		}
		if err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

// parseLong parses --name, --name=value or --name value.
func parseLong(o *options, s string, args []string) ([]string, error) {
	name := s[2:]
	if name == "" || name[0] == '-' || name[0] == '=' {
		return nil, fmt.Errorf("bad flag syntax: %s", s)
	}
	name, value, hasValue := strings.Cut(name, "=")
	f := lookup(func(f *Flag) bool { return f.Name == name })
	if f == nil {
		return nil, fmt.Errorf("unknown flag: --%s", name)
	}
	switch {
	case hasValue:
	case f.Kind == Bool:
		value = "true"
	case len(args) > 0:
		value, args = args[0], args[1:]
	default:
		return nil, fmt.Errorf("flag needs an argument: --%s", name)
	}
	return args, f.setFrom(o, value)
}

// parseShort parses -x, a run of them (-ih), -x=value, -xvalue or -x value.
func parseShort(o *options, s string, args []string) ([]string, error) {
	for shorts := s[1:]; shorts != ""; {
		c := shorts[:1]
		f := lookup(func(f *Flag) bool { return f.Short == c })
		if f == nil {
			return nil, fmt.Errorf("unknown shorthand flag: %q in -%s", rune(c[0]), shorts)
		}
		var value string
		switch {
		case len(shorts) > 2 && shorts[1] == '=':
			value, shorts = shorts[2:], ""
		case f.Kind == Bool:
			value, shorts = "true", shorts[1:]
		case len(shorts) > 1:
			value, shorts = shorts[1:], ""
		case len(args) > 0:
			value, args, shorts = args[0], args[1:], ""
		default:
			return nil, fmt.Errorf("flag needs an argument: %q in -%s", rune(c[0]), shorts)
		}
		if err := f.setFrom(o, value); err != nil {
			return nil, err
		}
	}
	return args, nil
}

func lookup(match func(*Flag) bool) *Flag {
	for i := range Flags {
		if match(&Flags[i]) {
			return &Flags[i]
		}
	}
	return nil
}

// setFrom sets the flag's value in o, with pflag's message for a bad one.
func (f *Flag) setFrom(o *options, value string) error {
	err := f.set(o, value)
	if err == nil {
		return nil
	}
	name := "--" + f.Name
	if f.Short != "" {
		name = "-" + f.Short + ", " + name
	}
	return fmt.Errorf("invalid argument %q for %q flag: %w", value, name, err)
}

// SessionNext reports whether the argument that follows args is SESSION (shell
// completion offers the session ids there): args are all flags, none waits for its
// value.
func SessionNext(args []string) bool {
	var o options
	rest, _, err := parseFlags(&o, args)
	return err == nil && len(rest) == 0
}
