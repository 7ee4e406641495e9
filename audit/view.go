package audit

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/termtext"
)

// view is a run arranged for rendering: each command with everything attributed to it.
type view struct {
	ID       string
	Start    RunStart
	Started  time.Time
	Ended    time.Time
	End      *RunEnd // nil when unsealed
	Commands []*cmdView
	Loose    []noteView   // events attributed to no command, in order
	Net      []noteView   // every net.allow, net.deny and their summaries, in order
	Alerts   []noteView   // every syscall.alert, in order
	Creds    []noteView   // every cred.issue and cred.revoke, in order
	Later    []*laterView // every runs-later file of every fs.diff, in order
	Bad      []string     // bodies that could not be decoded

	stage      *stagedView // the stage lines after the seal, nil when there are none
	stageLines []stageLine
	diffs      []*FSDiff // every fs.diff, a command's or between commands, in log order
}

// cmdView is one command and what it caused.
type cmdView struct {
	ID      string
	Started time.Time
	Start   CmdStart
	End     *CmdEnd // nil if the command never finished
	Diff    *FSDiff // nil if no fs.diff was recorded
	Events  []noteView
	Denied  int64              // denials: net.deny events, and those net.deny.summary counts
	Alerted int                // syscall.alert events
	later   map[int]*laterView // runs-later flags by index in Diff.Changes
}

// noteView is an event other than the command's own, summarised on one line.
type noteView struct {
	Time time.Time
	Cmd  string
	Type event.Type
	Verb string // "allow", "DENY", "ALERT", "issue", …
	What string // the destination, the syscall, the credential, …
	Why  string // the reason, when the body has one
	// Denied is how many denials the event stands for: 1 for net.deny, the count of a
	// net.deny.summary, 0 for anything else.
	Denied int64
	// Attempts is how many egress attempts it stands for: 1 for net.allow and net.deny,
	// the count of a net.deny.summary or net.allow.summary, 0 for anything else.
	Attempts int64
}

// buildView arranges recs (as ReadEvents returns them) for rendering.
func buildView(recs []Record) *view {
	v := &view{}
	byID := make(map[string]*cmdView)
	for _, r := range recs {
		if err := v.add(r, byID); err != nil {
			v.Bad = append(v.Bad, fmt.Sprintf("seq %d (%s): %v", r.Seq, r.Type, err))
		}
	}
	return v
}

func (v *view) add(r Record, byID map[string]*cmdView) error {
	switch r.Type {
	case event.RunStart:
		v.ID, v.Started = r.Run, r.TS
		return r.DecodeBody(&v.Start)
	case event.RunEnd:
		v.End, v.Ended = new(RunEnd), r.TS
		return r.DecodeBody(v.End)
	case event.CmdStart:
		c := &cmdView{ID: r.Cmd, Started: r.TS}
		v.Commands = append(v.Commands, c)
		byID[r.Cmd] = c
		return r.DecodeBody(&c.Start)
	case event.CmdEnd:
		if c := byID[r.Cmd]; c != nil {
			c.End = new(CmdEnd)
			return r.DecodeBody(c.End)
		}
	case event.StageApply, event.StageDiscard:
		return v.addStage(r)
	case event.FSDiff:
		if c := byID[r.Cmd]; c != nil {
			c.Diff = new(FSDiff)
			if err := r.DecodeBody(c.Diff); err != nil {
				return err
			}
			v.diffs = append(v.diffs, c.Diff)
			v.flagDiff(c, c.Diff)
			return nil
		}
		if r.Cmd == "" {
			return v.addBetween(r)
		}
	}
	if r.Type == event.CmdEnd || r.Type == event.FSDiff {
		return fmt.Errorf("names unknown command %q", r.Cmd)
	}
	n, err := note(r)
	v.addNote(n, byID[r.Cmd])
	return err
}

func (v *view) addNote(n noteView, c *cmdView) {
	switch n.Type {
	case event.NetAllow, event.NetDeny, event.NetDenySummary, event.NetAllowSummary:
		v.Net = append(v.Net, n)
	case event.SyscallAlert:
		v.Alerts = append(v.Alerts, n)
	case event.CredIssue, event.CredRevoke:
		v.Creds = append(v.Creds, n)
	}
	if c == nil {
		v.Loose = append(v.Loose, n)
		return
	}
	c.Events = append(c.Events, n)
	c.Denied += n.Denied
	switch n.Type {
	case event.SyscallAlert:
		c.Alerted++
	}
}

// note summarises an event other than a command's own on one line: the body decoded
// into its schema struct, its subject and reason picked out, and its other scalar
// fields shown as "k=v". An event type this schema does not know (a newer writer's) is
// shown by its type alone.
func note(r Record) (noteView, error) {
	n := noteView{Time: r.TS, Cmd: r.Cmd, Type: r.Type, Verb: string(r.Type)}
	body, err := event.DecodeBody(r.Type, r.Body)
	if errors.Is(err, event.ErrUnknownType) {
		return n, nil
	}
	if err != nil {
		return n, err
	}
	var what string
	var shown []string // json names of fields in What or Why
	switch b := body.(type) {
	case event.NetBody:
		n.Verb = map[event.Type]string{event.NetAllow: "allow", event.NetDeny: "DENY"}[r.Type]
		what, n.Why, shown = netDest(b), b.Reason, []string{"host", "port", "addr"}
		n.Attempts = 1
		if r.Type == event.NetDeny {
			n.Denied = 1
		}
	case event.NetDenySummaryBody:
		n.Verb, n.Denied, n.Attempts = "DENY", b.Denied, b.Denied
		what, n.Why = denySummaryWhat(b), denySummaryWhy(b)
		shown = []string{"denied", "reasons", "destinations", "destinations_at_least", "examples", "first", "last"}
	case event.NetAllowSummaryBody:
		n.Verb, n.Attempts, what = "allow", b.Allowed, allowSummaryWhat(b)
		shown = []string{"allowed", "bytes_up", "bytes_down", "intercepted", "requests", "failed", "destinations", "destinations_at_least", "named", "other", "first", "last"}
	case event.SyscallAlertBody:
		n.Verb, what, n.Why = "ALERT", strings.TrimSpace(b.Syscall+" "+b.Comm), b.Reason
		shown = []string{"syscall", "comm"}
	case event.CredIssueBody:
		n.Verb, what, n.Why, shown = "issue", b.Name, b.Reason, []string{"name"}
	case event.CredRevokeBody:
		n.Verb, what, n.Why, shown = "revoke", b.Name, b.Reason, []string{"name"}
	case event.GateRequestBody:
		n.Verb, what, shown = gateVerbs[r.Type], gateWhat(b.Gate, b.ID, b.Argv), gateShown
	case event.GateDecisionBody:
		n.Verb, what, n.Why, shown = gateVerbs[r.Type], gateWhat(b.Gate, b.ID, nil), b.Reason, gateShown
	case event.GateExecBody:
		n.Verb, what, n.Why, shown = gateVerbs[r.Type], gateWhat(b.Gate, b.ID, b.Argv), b.Reason, gateShown
	case event.CheckpointBody:
		n.Verb, what = "checkpoint", checkpointWhat(b.N, b.Name)
		if len(b.Problems) > 0 {
			n.Why = fmt.Sprintf("%d not kept", len(b.Problems))
		}
		shown = []string{"n", "name", "problems"}
	case event.RollbackBody:
		n.Verb, what = "ROLLBACK", "to "+checkpointWhat(b.N, b.Name)+": "+pathsWhat(b.Paths)+" by "+b.By
		if len(b.Problems) > 0 {
			n.Why = fmt.Sprintf("%d not restored", len(b.Problems))
		}
		shown = []string{"n", "name", "paths", "problems", "running", "by"}
	case event.StageBody:
		n.Verb, what, n.Why = stageVerbs[r.Type], stageWhat(b), stageWhy(b)
		shown = []string{"paths", "refused", "conflicts", "forced", "quarantined", "by"}
	}
	n.What = what
	if rest := scalars(body, append(shown, "reason")...); rest != "" {
		n.What = strings.TrimSpace(what + " " + rest)
	}
	return n, nil
}

// stageVerbs are the timeline verbs of what was done with a staged run's changes.
var stageVerbs = map[event.Type]string{event.StageApply: "stage APPLY", event.StageDiscard: "stage DISCARD"}

// stageWhat names the paths of a stage line: the first few, and how many in all.
func stageWhat(b event.StageBody) string { return pathsWhat(b.Paths) + " by " + b.By }

// pathsWhat names the first few of paths, and how many in all.
func pathsWhat(paths []string) string {
	shown := paths
	if len(shown) > 5 {
		shown = shown[:5]
	}
	what := fmt.Sprintf("%d path(s)", len(paths))
	if len(shown) > 0 {
		what += ": " + strings.Join(shown, " ")
		if len(shown) < len(paths) {
			what += " …"
		}
	}
	return what
}

// checkpointWhat names a staged session's checkpoint.
func checkpointWhat(n int, name string) string {
	if name == "" {
		return fmt.Sprintf("#%d", n)
	}
	return fmt.Sprintf("#%d (%s)", n, name)
}

func stageWhy(b event.StageBody) string {
	var why []string
	if b.Forced {
		why = append(why, fmt.Sprintf("forced over %d conflict(s)", len(b.Conflicts)))
	}
	if len(b.Refused) > 0 {
		why = append(why, fmt.Sprintf("%d refused", len(b.Refused)))
	}
	if len(b.Quarantined) > 0 {
		why = append(why, fmt.Sprintf("%d quarantined", len(b.Quarantined)))
	}
	return strings.Join(why, "; ")
}

// gateVerbs are the timeline verbs of the gate events.
var gateVerbs = map[event.Type]string{
	event.GateRequest: "gate request",
	event.GateApprove: "gate APPROVE",
	event.GateDeny:    "gate DENY",
	event.GateExec:    "gate exec",
}

// gateShown are the fields of a gate event that [gateWhat] shows.
var gateShown = []string{"gate", "id"}

// gateWhat names a gate request: the gate, the request id and the operation, cut short.
func gateWhat(gate, id string, argv []string) string {
	s := strings.Join(argv, " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return strings.TrimSpace(gate + " " + id + " " + s)
}

// denySummaryWhat says what a net.deny.summary counts: how many denials, over how long,
// how many destinations and a few of them.
func denySummaryWhat(b event.NetDenySummaryBody) string {
	what := fmt.Sprintf("%d more, not itemized (past the log's budget), over %s", b.Denied, b.Last.Sub(b.First).Round(time.Millisecond))
	if b.Destinations > 0 {
		at := ""
		if b.DestinationsAtLeast {
			at = "at least "
		}
		what += fmt.Sprintf(", to %s%d destination(s)", at, b.Destinations)
		if len(b.Examples) > 0 {
			what += " such as " + strings.Join(b.Examples, " ")
		}
	}
	return what
}

// allowSummaryWhat says what a net.allow.summary counts: how many attempts, over how
// long, the bytes they moved, the credentials delivered, and where they went, the
// destinations named with their own counts, busiest first.
func allowSummaryWhat(b event.NetAllowSummaryBody) string {
	what := fmt.Sprintf("%d more, not itemized (past the log's budget), over %s, %d bytes up, %d down",
		b.Allowed, b.Last.Sub(b.First).Round(time.Millisecond), b.BytesUp, b.BytesDown)
	if b.Intercepted > 0 {
		what += fmt.Sprintf(", %d with a credential delivered (%d requests)", b.Intercepted, b.Requests)
	}
	if b.Failed > 0 {
		what += fmt.Sprintf(", %d failed", b.Failed)
	}
	at := ""
	if b.DestinationsAtLeast {
		at = "at least "
	}
	what += fmt.Sprintf(", to %s%d destination(s):", at, b.Destinations)
	dests := make([]string, 0, len(b.Named))
	for d := range b.Named {
		dests = append(dests, d)
	}
	slices.SortFunc(dests, func(x, y string) int {
		if c := cmp.Compare(b.Named[y].Attempts, b.Named[x].Attempts); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	for _, d := range dests {
		what += " " + d + " " + allowedToWhat(b.Named[d])
	}
	if b.Other != nil {
		what += " and the rest " + allowedToWhat(*b.Other)
	}
	return what
}

// allowedToWhat is "(N, U up, D down)", with the credential count when there is one.
func allowedToWhat(a event.AllowedTo) string {
	s := fmt.Sprintf("(%d, %d up, %d down", a.Attempts, a.BytesUp, a.BytesDown)
	if a.Intercepted > 0 {
		s += fmt.Sprintf(", %d with a credential", a.Intercepted)
	}
	return s + ")"
}

// denySummaryWhy lists a net.deny.summary's kinds of denial, most frequent first.
func denySummaryWhy(b event.NetDenySummaryBody) string {
	kinds := make([]string, 0, len(b.Reasons))
	for k := range b.Reasons {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(x, y string) int {
		if b.Reasons[x] != b.Reasons[y] {
			return cmp.Compare(b.Reasons[y], b.Reasons[x])
		}
		return strings.Compare(x, y)
	})
	for i, k := range kinds {
		kinds[i] = fmt.Sprintf("%s: %d", k, b.Reasons[k])
	}
	return strings.Join(kinds, "; ")
}

// netDest is the destination of a network event: host:port, else the address dialled.
func netDest(b event.NetBody) string {
	if b.Host != "" {
		return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return b.Addr
}

// scalars renders the scalar fields of body, a schema struct, as "k=v" by json name,
// sorted, each value cut short: every field but those named in skip, those the
// encoding omits (omitempty and zero) and empty strings.
func scalars(body any, skip ...string) string {
	v := reflect.ValueOf(body)
	if v.Kind() != reflect.Struct {
		return ""
	}
	type kv struct{ k, v string }
	var kvs []kv
	for i := range v.NumField() {
		name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		f := v.Field(i)
		if name == "" || name == "-" || slices.Contains(skip, name) || opts == "omitempty" && f.IsZero() {
			continue
		}
		s := scalar(f)
		if s == "" {
			continue
		}
		if len(s) > 60 {
			s = s[:57] + "..."
		}
		kvs = append(kvs, kv{name, s})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	parts := make([]string, len(kvs))
	for i, p := range kvs {
		parts[i] = p.k + "=" + p.v
	}
	return strings.Join(parts, " ")
}

// scalar renders a string, number or boolean; anything else is "".
func scalar(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	}
	return ""
}

// clean makes text from the log safe to print on a terminal (see termtext).
func clean(s string) string { return termtext.Line(s) }

// cleanText is clean for multi-line text: newlines are kept.
func cleanText(s string) string { return termtext.Text(s) }

// argv renders a command line, quoting arguments that need it.
func argv(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>*?()[]{}#~!") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return clean(strings.Join(parts, " "))
}

// opLetter is the one-letter code of a FileChange op, as in git's --name-status.
func opLetter(op string) string {
	switch op {
	case "added":
		return "A"
	case "deleted":
		return "D"
	case "renamed":
		return "R"
	case "modified":
		return "M"
	case "touched":
		return "T"
	}
	return "?"
}

// diffstat summarises an FSDiff like git: "3 files changed, 10 insertions(+), 2 deletions(-)".
func diffstat(d *FSDiff) string {
	if d == nil {
		return "no diff recorded"
	}
	if d.Files == 0 {
		return "no changes"
	}
	return fmt.Sprintf("%s changed, %s(+), %s(-)", plural(d.Files, "file"),
		plural(d.Insertions, "insertion"), plural(d.Deletions, "deletion"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

// addBetween shows a session's changes made outside any command's diff as a loose
// note: the reviewer sees them, with the commands that were running, if any.
func (v *view) addBetween(r Record) error {
	var d FSDiff
	if err := r.DecodeBody(&d); err != nil {
		return err
	}
	v.flagDiff(nil, &d)
	v.diffs = append(v.diffs, &d)
	paths := make([]string, 0, len(d.Changes))
	for _, c := range d.Changes {
		paths = append(paths, c.Op+" "+c.Path)
	}
	why := "between commands"
	if len(d.During) > 0 {
		why = "while command(s) " + strings.Join(d.During, ", ") + " ran, outside their diffs"
	}
	if d.Gap != nil {
		why += "; INCOMPLETE: a limits.diff bound stopped this diff"
	}
	v.Loose = append(v.Loose, noteView{Time: r.TS, Type: r.Type, Verb: "CHANGED",
		What: diffstat(&d) + ": " + strings.Join(paths, ", "), Why: why})
	return nil
}
