package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"

	"github.com/cordonhq/cordon/gate/wire"
)

// gateJSONVersion versions `cordon gate ls --json`.
const gateJSONVersion = 1

// gateDialTimeout bounds each admin socket exchange.
const gateDialTimeout = 5 * time.Second

const gateUsage = `Usage: cordon gate ls [--json] | show ID | approve ID | deny ID [--why TEXT]
       cordon gate [request] NAME  (inside a sandbox: ask for the contract's gate NAME;
                                    "request" is needed for gates named ls, show, approve, deny)

  ls        pending requests of every live run and session on this host
  show      one request: what it would run and a preview of what it would publish
  approve   run the operation (on the host, outside the sandbox); the requester gets its output
  deny      refuse it; the requester gets the reason

Exit status: 0 ok, 1 no pending request has that ID, 2 usage.`

func gateCmd(ctx context.Context, stdio IO, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdio.Stderr, gateUsage)
		if len(args) == 0 {
			return errdefs.Exit(errdefs.ExitUsage)
		}
		return nil
	}
	switch args[0] {
	case "ls":
		return gateList(ctx, stdio, args[1:])
	case "show":
		return gateShow(ctx, stdio, args[1:])
	case "approve":
		return gateDecide(ctx, stdio, "approve", args[1:])
	case "deny":
		return gateDecide(ctx, stdio, "deny", args[1:])
	case "request":
		args = args[1:] // `cordon gate request NAME`, for gates named like a subcommand
	}
	if code := wire.GateMain(args, stdio.Stdout, stdio.Stderr); code != 0 {
		return errdefs.Exit(code)
	}
	return nil
}

func gateFlags(name, synopsis string, stdio IO) (*flag.FlagSet, *string) {
	fs := newFlags("gate "+name, "gate "+synopsis, stdio.Stderr)
	root := fs.String("run-root", paths.RunRoot().String(), "run `DIR` whose gates/ holds the runs' admin sockets")
	return fs, root
}

func gateList(ctx context.Context, stdio IO, args []string) error {
	fs, root := gateFlags("ls", "ls [--json]", stdio)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errdefs.Usagef("gate ls: takes no arguments")
	}
	ps := pendingAll(ctx, *root, stdio.Stderr)
	if *asJSON {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Version int            `json:"gate_ls_version"`
			Pending []wire.Pending `json:"pending"`
		}{gateJSONVersion, pendingOnly(ps)})
	}
	if len(ps) == 0 {
		fmt.Fprintln(stdio.Stdout, "no pending gate requests")
		return nil
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRUN\tGATE\tWAITING\tRUNS")
	for _, p := range ps {
		wait := time.Since(p.Requested).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.ID, p.Run, p.Gate, wait, clip(strings.Join(p.Argv, " "), 60))
	}
	tw.Flush()
	fmt.Fprintln(stdio.Stdout, "\n`cordon gate show ID` shows what a request would publish.")
	return nil
}

func gateShow(ctx context.Context, stdio IO, args []string) error {
	fs, root := gateFlags("show", "show ID", stdio)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errdefs.Usagef("gate show: want one ID")
	}
	id := fs.Arg(0)
	for _, p := range pendingAll(ctx, *root, stdio.Stderr) {
		if p.ID != id {
			continue
		}
		w := stdio.Stdout
		fmt.Fprintf(w, "request %s: gate %s of run %s\n", p.ID, p.Gate, p.Run)
		fmt.Fprintf(w, "requested %s", p.Requested.Local().Format(time.RFC3339))
		if p.Cmd != "" {
			fmt.Fprintf(w, " by command %s", p.Cmd)
		}
		fmt.Fprintf(w, "\nwhy (from the contract): %s\n\n%s\n", p.Why, strings.TrimRight(p.Preview, "\n"))
		fmt.Fprintf(w, "\ncordon gate approve %s   |   cordon gate deny %s --why TEXT\n", p.ID, p.ID)
		return nil
	}
	return errdefs.Exitf(errdefs.ExitFailure, "gate show: no pending request %q (see cordon gate ls)", id)
}

func gateDecide(ctx context.Context, stdio IO, verb string, args []string) error {
	fs, root := gateFlags(verb, verb+" ID", stdio)
	why := new(string)
	if verb == "deny" {
		fs.Usage = func() {
			fmt.Fprintf(stdio.Stderr, "Usage: cordon gate deny ID [--why TEXT]\n\nFlags:\n")
			fs.PrintDefaults()
		}
		why = fs.String("why", "", "the reason the requester is told")
	}
	// The ID may come before the flags (`deny ID --why TEXT`, as the hints print it).
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if id == "" || fs.NArg() != 0 {
		fs.Usage()
		return errdefs.Usagef("gate %s: want one ID", verb)
	}
	by := approver()
	for _, sock := range adminSockets(*root) {
		cctx, cancel := context.WithTimeout(ctx, gateDialTimeout)
		var err error
		if verb == "approve" {
			err = wire.Approve(cctx, sock, id, by)
		} else {
			err = wire.Deny(cctx, sock, id, by, *why)
		}
		cancel()
		switch {
		case errors.Is(err, wire.ErrNotFound), errors.Is(err, wire.ErrUnreachable):
			continue
		case err != nil:
			return errdefs.CannotRun(fmt.Errorf("gate %s: %s: %w", verb, filepath.Base(sock), err))
		}
		if verb == "approve" {
			fmt.Fprintf(stdio.Stdout, "approved %s; the operation runs now and its output goes to the requester\n", id)
		} else {
			fmt.Fprintf(stdio.Stdout, "denied %s\n", id)
		}
		return nil
	}
	return errdefs.Exitf(errdefs.ExitFailure, "gate %s: no pending request %q (see cordon gate ls)", verb, id)
}

// adminSockets lists the admin sockets under root, sorted.
func adminSockets(root string) []string {
	ms, _ := filepath.Glob(filepath.Join(paths.Root(root).Gates(), "*.sock"))
	sort.Strings(ms)
	return ms
}

// pendingAll lists the pending requests of every live run, oldest first. Dead sockets
// (a run that crashed) are skipped; other failures are reported on stderr.
func pendingAll(ctx context.Context, root string, stderr io.Writer) []wire.Pending {
	var out []wire.Pending
	for _, sock := range adminSockets(root) {
		cctx, cancel := context.WithTimeout(ctx, gateDialTimeout)
		ps, err := wire.List(cctx, sock)
		cancel()
		if errors.Is(err, wire.ErrUnreachable) {
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "cordon: gate: %s: %v\n", filepath.Base(sock), err)
			continue
		}
		out = append(out, ps...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Requested.Before(out[j].Requested) })
	return out
}

func pendingOnly(ps []wire.Pending) []wire.Pending {
	if ps == nil {
		return []wire.Pending{}
	}
	return ps
}

// approver is the host user's name, recorded as the decision's "by".
func approver() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
