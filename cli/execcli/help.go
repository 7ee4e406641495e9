package execcli

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// The words of exec's help, which `cordon exec --help`, its man page and cordon-exec's
// help all show.
const (
	Use   = "exec [flags] SESSION [flags] [--] CMD [ARGS...]"
	Short = "run a command in a session"
	Long  = `Runs CMD in the sandbox of session SESSION (cordon session start) and exits with its
status. Flags go before or after SESSION and end at CMD: everything from CMD on is CMD's.

Exit status: CMD's own (with --json: 0 unless cordon failed); 124 when the timeout killed
it; 125 when cordon could not run it (no such session, a refused command); 137 when the
monitor stopped it; 2 for a usage error or a bad request.`
	Example = `  cordon exec $id -- go build ./...
  cordon exec $id --timeout 30s -- go test ./...
  cordon exec $id --json -- make          # {"schema": "cordon.exec/v1", "exit_code": ...}
  cordon exec $id -i -- patch -p1 < fix.diff`
)

// WriteHelp writes cordon-exec's help to w: exec's, laid out as cordon's help is.
func WriteHelp(w io.Writer, prog string) {
	fmt.Fprintf(w, "%s\n\nUsage: %s %s\n", Long, prog, strings.TrimPrefix(Use, "exec "))
	fmt.Fprintf(w, "\nExamples:\n%s\n", strings.ReplaceAll(Example, "cordon exec", prog))
	fmt.Fprintln(w, "\nFlags:")
	// by name, as cobra lists them; not those naming a server, which cordon-exec does
	// not reach (it refuses them)
	flags := slices.DeleteFunc(slices.Clone(Flags), func(f Flag) bool { return f.remote })
	slices.SortFunc(flags, func(a, b Flag) int { return strings.Compare(a.Name, b.Name) })
	heads := make([]string, len(flags))
	width := 0
	for i, f := range flags {
		head := "    "
		if f.Short != "" {
			head = "-" + f.Short + ", "
		}
		head += "--" + f.Name
		if v := f.valueName(); v != "" {
			head += " " + v
		}
		heads[i] = head
		width = max(width, len(head))
	}
	for i, f := range flags {
		usage := strings.ReplaceAll(f.Usage, "`", "")
		if f.Kind == Duration && f.Default != "0s" || f.Kind == Int && f.Default != "0" {
			usage += " (default " + f.Default + ")"
		}
		fmt.Fprintf(w, "  %-*s   %s\n", width, heads[i], usage)
	}
	fmt.Fprintf(w, "\n%s reaches no cordon serve daemon: cordon exec --host does (docs/serve.md).\n", prog)
}

// valueName is what help calls the flag's value: the back-quoted word of its usage,
// else its type; bool flags take none.
func (f *Flag) valueName() string {
	if _, rest, ok := strings.Cut(f.Usage, "`"); ok {
		if name, _, ok := strings.Cut(rest, "`"); ok {
			return name
		}
	}
	switch f.Kind {
	case Duration:
		return "duration"
	case String:
		return "string"
	case Int:
		return "int"
	}
	return ""
}
