// Package wire is the protocol between a session's supervisor and its clients (`cordon
// exec`, `cordon session`, the Go client in package session), and the record the
// supervisor publishes for each session: one JSON request line per connection, input
// lines, answer frames (docs/sessions.md).
package wire

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
)

// The supervisor protocol (docs/sessions.md): one connection per request; the client
// sends one JSON [Request] line, then, for an exec with Stdin, [Input] lines; the
// supervisor answers with [Frame] lines.

// MaxCap is the largest [Request.Cap]: the supervisor, a host process outside the
// sandbox's memory limit, holds up to a few bytes per character of the kept head of
// each stream (runner/outcap), so a cap is bounded like every other request field.
// It fits the largest cordon asks itself: the MCP file tools' helper (mcp/files.go).
const MaxCap = 2 << 20

// Request is the first line a client sends.
type Request struct {
	Op string `json:"op"` // "exec", "sweep", "checkpoint", "rollback" or "stop"
	// Name is the checkpoint's name (checkpoint; "" for a numbered one) or the one to
	// roll back to (rollback: a name, a number, or "-K").
	Name      string   `json:"name,omitempty"`
	Argv      []string `json:"argv,omitempty"`
	Dir       string   `json:"dir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	// Cap is the number of characters of each of stdout and stderr the answer carries;
	// the whole output goes to a spill file inside the sandbox. 0: no cap. At most
	// [MaxCap]: the supervisor refuses more.
	Cap int `json:"cap,omitempty"`
	// Stdin says Input lines follow; without it the command reads an empty stdin.
	Stdin bool `json:"stdin,omitempty"`
}

// Input is one line of stdin for an exec, after the Request. EOF closes the command's
// stdin; closing the connection instead ends the command.
type Input struct {
	Data []byte `json:"data,omitempty"`
	EOF  bool   `json:"eof,omitempty"`
}

// Frame is one line of the supervisor's answer: an output chunk, or last the outcome.
type Frame struct {
	FD     int     `json:"fd,omitempty"`
	Data   []byte  `json:"data,omitempty"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	Code   int     `json:"code,omitempty"` // cordon's exit status with Error
	// NoSpace marks an Error that is the file system's ENOSPC or EDQUOT: the disk
	// holding the session's run root (a served tenant's own disk) is full.
	NoSpace bool `json:"no_space,omitempty"`
	Done    bool `json:"done,omitempty"`    // answer to stop and sweep
	Removed int  `json:"removed,omitempty"` // spill files a sweep removed
	// Changed lists the workspace paths changed since the previous sweep (the answer
	// to sweep).
	Changed []string `json:"changed,omitempty"`
	// More counts the changes past the sweep's bounds, not in Changed: not 0, the list
	// is incomplete (the answer to sweep).
	More int `json:"more,omitempty"`
	// Checkpoint is the checkpoint taken (checkpoint) or rolled back to (rollback).
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Problems are what a checkpoint does not hold, or a rollback did not restore
	// ("path: why"; the path is the sandbox's naming).
	Problems []string `json:"problems,omitempty"`
}

// Checkpoint is a staged session's checkpoint.
type Checkpoint struct {
	N      int    `json:"n"`
	Name   string `json:"name,omitempty"`
	Auto   bool   `json:"auto,omitempty"`
	Copied int    `json:"copied"`
	Linked int    `json:"linked"`
}

// ResultVersion versions [Result], which is `cordon exec --json`'s output. Fields are
// only added within a version (Denied and DeniedMore were added in version 1, Alerts,
// Gates and GatesMore since).
const ResultVersion = 1

// Result is the outcome of one exec. Stdout and Stderr are filled in by the client from
// the output chunks (capped when the request had a cap).
type Result struct {
	V        int    `json:"v"`
	Session  string `json:"session"`
	Cmd      string `json:"cmd"` // the seq of its cmd.start in the session's log
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated is true when stdout or stderr was cut at the cap; SpillPath (stdout's)
	// and StderrSpillPath name the files inside the sandbox that hold the whole output.
	Truncated       bool     `json:"truncated"`
	SpillPath       string   `json:"spill_path"`
	StderrSpillPath string   `json:"stderr_spill_path,omitempty"`
	DurationMS      int64    `json:"duration_ms"`
	TimedOut        bool     `json:"timed_out"`
	Reason          string   `json:"reason"`
	Diffstat        Diffstat `json:"diffstat"`
	// DeniedEgress lists the "host:port" the egress proxy refused, once per attempt,
	// for the command's first 1000 refusals (the log accounts for every one).
	DeniedEgress []string `json:"denied_egress"`
	// Denied explains them, once per destination.
	Denied []Denial `json:"denied"`
	// DeniedMore counts the command's refusals past those 1000, which neither lists
	// (the log itemizes them, or counts them in net.deny.summary lines).
	DeniedMore int `json:"denied_more"`
	// Alerts lists the monitor alerts read by the time the command ended, once per
	// category, target and syscall.
	Alerts []Alert `json:"alerts"`
	// Gates is the host gate service's account of the gate requests the command made
	// (`cordon gate NAME` in it), the first 4 in the order they ended: what a person
	// or cordon decided and what the operation exited with, never the command's word.
	// GatesMore counts the rest (the log has each).
	Gates     []gatewire.Decided `json:"gates"`
	GatesMore int                `json:"gates_more,omitempty"`
}

// Alert is one kind of monitor alert a command raised, counted: the category of the
// deviation ("write to a read-only path"), what it touched and the syscall. Nothing of
// the contract is in it.
type Alert struct {
	Category string `json:"category"`
	Target   string `json:"target"`
	Syscall  string `json:"syscall"`
	Count    int    `json:"count"`
}

// Denial is one destination the egress proxy refused the command: the destination it
// asked for, the kind of denial and the contract rule that would allow it ("" when none
// could). Nothing else of the contract is in it.
type Denial struct {
	Destination   string `json:"destination"`
	Reason        string `json:"reason"`
	SuggestedRule string `json:"suggested_rule"`
}

// Diffstat summarises a command's fs.diff.
type Diffstat struct {
	Files      int `json:"files"`
	Insertions int `json:"insertions"`
	Deletions  int `json:"deletions"`
}

// Info is RUNROOT/sessions/ID.json, written by the supervisor.
type Info struct {
	ID string `json:"id"`
	// Supervisor is the session's supervisor process: while it lives, the session does.
	owner.Process
	Started   time.Time `json:"started"`
	Contract  string    `json:"contract"`
	Backend   string    `json:"backend"`
	Workspace string    `json:"workspace"`
	AuditDir  string    `json:"audit_dir"`
	// TimeoutMS is the contract's per-command timeout (commands.timeout), in
	// milliseconds: a client that must not lengthen it (cordon mcp, for its agent)
	// bounds what it asks for by it. 0 in the record of an older cordon.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// List reads the session records in dir (a run root's Sessions), live or dead, sorted
// by id: none when dir is not safe to trust ([paths.CheckDir]), and only the records
// [Read] accepts.
func List(dir string) []Info {
	if paths.CheckDir(dir, paths.Owner()) != nil {
		return nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []Info
	for _, m := range matches {
		if si, err := Read(dir, strings.TrimSuffix(filepath.Base(m), ".json")); err == nil {
			out = append(out, si)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Read reads session id's record in dir, which the caller has checked
// ([paths.CheckDir]): a regular file this user owns and no one else may write
// ([paths.ReadRecord]), naming the session id.
func Read(dir, id string) (Info, error) {
	var si Info
	data, err := paths.ReadRecord(filepath.Join(dir, id+".json"), paths.Owner())
	if err != nil {
		return si, err
	}
	if err := json.Unmarshal(data, &si); err != nil {
		return si, err
	}
	if si.ID != id {
		return si, fmt.Errorf("the record of session %s names session %q", id, si.ID)
	}
	return si, nil
}
