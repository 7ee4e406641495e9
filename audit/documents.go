package audit

import (
	"fmt"
	"time"
)

// The --json documents of `cordon audit ls`, `show` and `verify`, which `cordon
// serve`'s GET /v1/runs, /v1/runs/{id} and /v1/runs/{id}/verify answer too: one
// shape, made here, for both.
const (
	SchemaLs     = "cordon.audit.ls/v1"
	SchemaShow   = "cordon.audit.show/v1"
	SchemaVerify = "cordon.audit.verify/v1"
	ShowVersion  = 1 // show_version
)

// RetentionNote is what a listing says about retention: cordon deletes no run by
// itself.
const RetentionNote = "retention: keeping all runs; remove sealed ones with cordon audit prune --older-than D | --keep N"

// Listing is the document of `cordon audit ls --json`: the runs of an audit root,
// newest first.
type Listing struct {
	Schema    string      `json:"schema"`
	Root      string      `json:"root"`
	Retention string      `json:"retention"`
	Runs      []ListedRun `json:"runs"`
}

// ListedRun is one run of a [Listing].
type ListedRun struct {
	ID        string     `json:"id"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended"`    // null until sealed
	Contract  string     `json:"contract"` // "" for the built-in default contract
	Backend   string     `json:"backend"`
	Workspace string     `json:"workspace"` // "" in logs that predate it
	Commands  int        `json:"commands"`
	Sealed    bool       `json:"sealed"`
	Status    string     `json:"status"`          // as the STATUS column: "exit 0 (exited)", "unsealed", "unreadable"
	ExitCode  *int       `json:"exit_code"`       // null until sealed
	Error     string     `json:"error,omitempty"` // why the log could not be read
}

// NewListing is the listing of the runs of root, as [List] returns them.
func NewListing(root string, runs []Summary) Listing {
	out := Listing{Schema: SchemaLs, Root: root, Retention: RetentionNote, Runs: []ListedRun{}}
	for _, r := range runs {
		j := ListedRun{ID: r.ID, Started: r.Start, Contract: r.ContractPath, Backend: r.Backend, Workspace: r.Workspace,
			Commands: r.Commands, Sealed: r.Sealed, Status: r.Status()}
		if r.Sealed {
			ended, code := r.Ended, r.End.ExitCode
			j.Ended, j.ExitCode = &ended, &code
		}
		if r.Err != nil {
			j.Error = r.Err.Error()
		}
		out.Runs = append(out.Runs, j)
	}
	return out
}

// Shown is the document of `cordon audit show --json`: a run's events.
type Shown struct {
	Schema    string          `json:"schema"`
	Version   int             `json:"show_version"`
	Run       string          `json:"run"`
	RunsLater []RunsLaterFile `json:"runs_later"` // added within version 1
	Events    []Record        `json:"events"`
}

// NewShown is the document of run id's records, as [ReadEvents] returns them.
func NewShown(id string, recs []Record) Shown {
	return Shown{Schema: SchemaShow, Version: ShowVersion, Run: id, RunsLater: RunsLater(recs), Events: recs}
}

// Verified is the document of `cordon audit verify --json`.
type Verified struct {
	Schema  string         `json:"schema"`
	Run     string         `json:"run"`
	OK      bool           `json:"ok"` // intact and sealed: the exit status is 0
	Sealed  bool           `json:"sealed"`
	Lines   int            `json:"lines"` // lines found intact, from the first
	Head    string         `json:"head"`  // the hash of the last intact line
	Problem *VerifyProblem `json:"problem"`
	// DiffGaps counts the fs.diff lines a limits.diff bound stopped short.
	DiffGaps int `json:"diff_gaps,omitempty"`
}

// VerifyProblem is a [VerifyError] in a [Verified].
type VerifyProblem struct {
	Line   int    `json:"line"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// NewVerified is the document of run id's verification report.
func NewVerified(id string, rep Report) Verified {
	out := Verified{Schema: SchemaVerify, Run: id, OK: rep.OK(), Sealed: rep.Sealed, Lines: rep.Lines, Head: rep.Head,
		DiffGaps: rep.DiffGaps}
	if p := rep.Problem; p != nil {
		out.Problem = &VerifyProblem{Line: p.Line, Kind: fmt.Sprint(p.Kind), Detail: p.Detail}
	}
	return out
}
