package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// newManCmd is `cordon internal man DIR` (make man): one man page per command, in
// section 1, made from the same text as --help. cobra/doc would need go-md2man, which
// this build does not link; the pages are plain man(7) roff.
func newManCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "write a man page per command into DIR",
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errdefs.Usagef("internal man: want one DIR")
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			return writeManPages(c.Root(), args[0])
		},
	}
}

// writeManPages writes cordon.1 and cordon-CMD[-SUB].1 for every visible command.
func writeManPages(c *cobra.Command, dir string) error {
	if !c.IsAvailableCommand() && c.HasParent() || c.Name() == "help" {
		return nil
	}
	name := strings.ReplaceAll(c.CommandPath(), " ", "-")
	f, err := os.Create(filepath.Join(dir, name+".1"))
	if err != nil {
		return err
	}
	writeMan(f, c)
	if err := f.Close(); err != nil {
		return fmt.Errorf("man page %s: %w", name, err)
	}
	for _, s := range c.Commands() {
		if err := writeManPages(s, dir); err != nil {
			return err
		}
	}
	return nil
}

// writeMan writes c's man page: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXAMPLES and SEE
// ALSO, from the command's Short, Use, Long, flags and Example.
func writeMan(w io.Writer, c *cobra.Command) {
	name := strings.ReplaceAll(c.CommandPath(), " ", "-")
	fmt.Fprintf(w, ".TH %q 1 \"\" \"cordon %s\" \"cordon manual\"\n", strings.ToUpper(name), roff(Version))
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", name, roff(c.Short))
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B %s\n", roff(useLine(c)))
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	fmt.Fprintln(w, ".SH DESCRIPTION")
	for i, para := range strings.Split(strings.TrimSpace(desc), "\n\n") {
		if i > 0 {
			fmt.Fprintln(w, ".PP")
		}
		fmt.Fprintln(w, roff(strings.Join(strings.Fields(para), " ")))
	}
	if f := c.LocalFlags(); f.HasAvailableFlags() {
		fmt.Fprintln(w, ".SH OPTIONS")
		f.VisitAll(func(fl *pflag.Flag) { manFlag(w, fl) })
	}
	if c.Example != "" {
		fmt.Fprintf(w, ".SH EXAMPLES\n.nf\n.RS 4\n%s\n.RE\n.fi\n", roff(strings.TrimRight(c.Example, "\n")))
	}
	var see []string
	if c.HasParent() {
		see = append(see, manRef(c.Parent()))
	}
	for _, s := range visibleSubs(c) {
		see = append(see, manRef(s))
	}
	if len(see) > 0 {
		fmt.Fprintf(w, ".SH SEE ALSO\n%s\n", strings.Join(see, ", "))
	}
}

func manFlag(w io.Writer, fl *pflag.Flag) {
	if fl.Hidden {
		return
	}
	varname, usage := pflag.UnquoteUsage(fl)
	head := "\\fB\\-\\-" + roff(fl.Name) + "\\fR"
	if fl.Shorthand != "" {
		head = "\\fB\\-" + roff(fl.Shorthand) + "\\fR, " + head
	}
	if varname != "" {
		head += " \\fI" + roff(varname) + "\\fR"
	}
	if d := fl.DefValue; d != "" && d != "false" && d != "0" && d != "0s" && d != "[]" {
		usage += fmt.Sprintf(" (default %q)", d)
	}
	fmt.Fprintf(w, ".TP\n%s\n%s\n", head, roff(usage))
}

func manRef(c *cobra.Command) string {
	return "\\fB" + roff(strings.ReplaceAll(c.CommandPath(), " ", "-")) + "\\fR(1)"
}

// roff escapes text for a man page: backslashes, hyphens that are options, and lines
// that would start with a control character.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
