// Package fileop is the file tools of `cordon mcp` (read, write, edit, list) as they
// run inside a sandbox: `cordon internal file OP PATH [flags]`, run by the session's
// exec path with cordon's own binary (paths.SandboxInit, in every sandbox), so that
// the contract applies to every open exactly as it does to the agent's commands (a
// write outside the writable set fails there, with the kernel's reason) and the audit
// log records each call as the command it ran. The host never opens a workspace path
// for these tools.
//
// The payload of write and edit comes on stdin; the answer is one JSON object on
// stdout ([Answer]), with exit status 0, or {"error": ...} with status 1.
//
// Paths are the sandbox's: relative to the command's directory (the contract's
// workdir), absolute ones as the sandbox sees them (a spill file under /run/cordon).
// Links are followed as any command in the sandbox would follow them: the sandbox,
// not this package, is the boundary. What this package adds is that nothing blocks
// (a FIFO is refused, not opened for a blocking read or write), nothing is read or
// answered without a bound, and binary content is refused rather than sent to a model.
package fileop

// Arg is the `internal` subcommand: `internal file OP ...`.
const Arg = "file"

// The operations.
const (
	OpRead  = "read"
	OpWrite = "write"
	OpEdit  = "edit"
	OpList  = "list"
)

// Bounds. The host side refuses larger requests before running anything.
const (
	// MaxWrite is the largest content write and edit accept, and the largest file
	// edit rewrites.
	MaxWrite = 8 << 20
	// MaxReadChars bounds the text one read answers with.
	MaxReadChars = 256 << 10
	// DefaultReadChars is a read's cap when the caller gives none.
	DefaultReadChars = 50000
	// MaxLineChars cuts a single line longer than this (minified code) in a read.
	MaxLineChars = 4000
	// MaxEntries bounds one list.
	MaxEntries = 5000
	// DefaultEntries is a list's cap when the caller gives none.
	DefaultEntries = 500
	// sniff is how much of a file is checked for a NUL byte before it is read as text.
	sniff = 8 << 10
)

// Answer is the JSON object the helper prints: one of the results, or Error.
type Answer struct {
	Error string      `json:"error,omitempty"`
	Read  *ReadResult `json:"read,omitempty"`
	Write *Written    `json:"write,omitempty"`
	Edit  *Edited     `json:"edit,omitempty"`
	List  *Listing    `json:"list,omitempty"`
}

// ReadResult is a read's answer: lines StartLine..EndLine (1-based, inclusive) of
// Path. EndLine < StartLine when the range holds no line.
type ReadResult struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	StartLine int    `json:"start_line"`
	EndLine   int    `json:"end_line"`
	// TotalLines is the file's line count, or -1 when the read stopped before the end.
	TotalLines int `json:"total_lines"`
	// Truncated says the answer stopped at the character cap before the range's end,
	// or cut a line longer than MaxLineChars.
	Truncated bool  `json:"truncated"`
	Size      int64 `json:"size"`
}

// Written is a write's answer.
type Written struct {
	Path    string `json:"path"`
	Bytes   int    `json:"bytes"`
	Created bool   `json:"created"`
}

// Edit is an edit's payload (stdin).
type Edit struct {
	Old        string `json:"old"`
	New        string `json:"new"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// Edited is an edit's answer.
type Edited struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
}

// Listing is a list's answer.
type Listing struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries"`
	// Truncated says the listing stopped at its cap.
	Truncated bool `json:"truncated"`
	// Skipped counts directories that could not be read (permission), or .git
	// directories not descended into.
	Skipped int `json:"skipped"`
}

// Entry is one listed path, relative to the listed directory.
type Entry struct {
	Path string `json:"path"`
	Type string `json:"type"` // "file", "dir", "symlink", "fifo" or "other"
	Size int64  `json:"size"`
}
