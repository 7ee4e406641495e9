package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cordonhq/cordon/sandboxinit/fileop"
	"github.com/cordonhq/cordon/session"
)

// helperTimeout bounds one file tool's run inside the sandbox, and the contract's
// commands.timeout (Options.MaxTimeout) bounds it when shorter: the helper is a
// command of the session like any other, and no call runs one past that grant.
const helperTimeout = 2 * time.Minute

// helperCap bounds the helper's answer: its largest, a read at MaxReadChars, JSON
// escaped, fits. An answer cut at it is refused, never parsed.
const helperCap = 8 * fileop.MaxReadChars

// maxLine bounds read_file's offset and limit (so their sum cannot overflow).
const maxLine = 1 << 31

// ReadInput is read_file's arguments.
type ReadInput struct {
	Path     string `json:"path" jsonschema:"the file, relative to the workspace or absolute inside the sandbox (a spill_path from exec works)"`
	Offset   int    `json:"offset,omitempty" jsonschema:"the first line to return, counted from 1 (default 1)"`
	Limit    int    `json:"limit,omitempty" jsonschema:"how many lines to return (default: to the end of the file, within max_chars)"`
	MaxChars int    `json:"max_chars,omitempty" jsonschema:"cap on the characters returned (default 50000, at most 262144); truncated says the range was cut"`
}

// WriteInput is write_file's arguments.
type WriteInput struct {
	Path    string `json:"path" jsonschema:"the file, relative to the workspace or absolute inside the sandbox; missing parent directories are made"`
	Content string `json:"content" jsonschema:"the whole new content (at most 8 MiB)"`
}

// EditInput is edit_file's arguments.
type EditInput struct {
	Path       string `json:"path" jsonschema:"the file, relative to the workspace or absolute inside the sandbox"`
	OldText    string `json:"old_text" jsonschema:"the exact text to replace, whitespace included; it must occur exactly once unless replace_all"`
	NewText    string `json:"new_text" jsonschema:"the text that replaces it"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence instead of requiring exactly one"`
}

// ListInput is list_files' arguments.
type ListInput struct {
	Path       string `json:"path,omitempty" jsonschema:"the directory (default: the workspace)"`
	Recursive  bool   `json:"recursive,omitempty" jsonschema:"list the whole tree below it (.git directories are listed but not entered)"`
	MaxEntries int    `json:"max_entries,omitempty" jsonschema:"cap on the entries returned (default 500, at most 5000); truncated says the list was cut"`
}

func (t *tools) addFiles(s *gomcp.Server) {
	inside := " Runs inside the cordon sandbox, under its contract: a path the contract does not show is not found, " +
		"and one it does not make writable cannot be written (the error says why)."
	gomcp.AddTool(s, &gomcp.Tool{
		Name:  "read_file",
		Title: "Read a text file",
		Description: "Reads lines of a text file, from offset for limit lines, capped at max_chars (lines longer than 4000 characters are cut). " +
			"Binary files are refused (use exec with od or xxd)." + inside,
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.read)
	gomcp.AddTool(s, &gomcp.Tool{
		Name:        "write_file",
		Title:       "Write a file",
		Description: "Writes a whole file, creating it (and missing parent directories) or replacing its content." + inside,
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.write)
	gomcp.AddTool(s, &gomcp.Tool{
		Name:  "edit_file",
		Title: "Replace text in a file",
		Description: "Replaces old_text with new_text in a text file. old_text must match exactly, whitespace included, and occur exactly once " +
			"(or set replace_all); otherwise nothing is changed and the error says how many times it occurs." + inside,
		Annotations: &gomcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, t.edit)
	gomcp.AddTool(s, &gomcp.Tool{
		Name:        "list_files",
		Title:       "List a directory",
		Description: "Lists a directory's entries (path, type, size), or its whole tree with recursive, capped at max_entries." + inside,
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, t.list)
}

// runHelper runs `cordon internal file OP [flags] -- PATH` in the sandbox with payload
// on stdin and returns its answer, or the reason it failed as the agent should see it.
func (t *tools) runHelper(ctx context.Context, op string, flags []string, path string, payload []byte) (fileop.Answer, error) {
	if err := checkPath(path); err != nil {
		return fileop.Answer{}, err
	}
	argv := append([]string{t.o.Helper, "internal", fileop.Arg, op}, flags...)
	argv = append(argv, "--", path)
	o := session.ExecOptions{Timeout: min(helperTimeout, t.o.MaxTimeout), Cap: helperCap}
	if payload != nil {
		o.Stdin = bytes.NewReader(payload)
	}
	res, err := t.sess.Exec(ctx, argv, o)
	if err != nil {
		return fileop.Answer{}, problem(err)
	}
	if res.Truncated {
		return fileop.Answer{}, fmt.Errorf("the %s answer passed %d characters and was refused", op, helperCap)
	}
	var a fileop.Answer
	if err := json.Unmarshal([]byte(res.Stdout), &a); err != nil {
		return fileop.Answer{}, fmt.Errorf("%s failed (exit %d): %s", op, res.ExitCode, strings.TrimSpace(res.Reason+" "+res.Stderr))
	}
	if a.Error != "" {
		return a, errors.New(explain(op, a.Error))
	}
	if res.ExitCode != 0 {
		return a, fmt.Errorf("%s failed (exit %d)", op, res.ExitCode)
	}
	return a, nil
}

// explain adds to a kernel's refusal of op what it means in a sandbox.
func explain(op, msg string) string {
	reading := op == fileop.OpRead || op == fileop.OpList
	switch {
	case reading && (strings.HasSuffix(msg, "permission denied") || strings.HasSuffix(msg, "operation not permitted")):
		// Not a matter of writing: /proc/1/environ, a file its mode keeps from the
		// sandbox's user.
		return msg + " (the sandbox may not read this path; cordon explain shows what the contract grants)"
	case strings.HasSuffix(msg, "read-only file system"), strings.HasSuffix(msg, "permission denied"), strings.HasSuffix(msg, "operation not permitted"):
		return msg + " (the contract does not make this path writable here; cordon explain shows what it grants)"
	case strings.HasSuffix(msg, "no such file or directory"):
		return msg + " (or the contract does not show it in the sandbox)"
	}
	return msg
}

func (t *tools) read(ctx context.Context, _ *gomcp.CallToolRequest, in ReadInput) (*gomcp.CallToolResult, *fileop.ReadResult, error) {
	if in.Offset < 0 || in.Limit < 0 || in.Offset > maxLine || in.Limit > maxLine || in.MaxChars < 0 || in.MaxChars > fileop.MaxReadChars {
		return nil, nil, fmt.Errorf("offset and limit must be between 0 and %d, max_chars between 0 and %d", maxLine, fileop.MaxReadChars)
	}
	flags := []string{"--offset", strconv.Itoa(max(in.Offset, 1)), "--limit", strconv.Itoa(in.Limit)}
	if in.MaxChars > 0 {
		flags = append(flags, "--max-chars", strconv.Itoa(in.MaxChars))
	}
	a, err := t.runHelper(ctx, fileop.OpRead, flags, in.Path, nil)
	if err != nil || a.Read == nil {
		return nil, nil, orMissing(err, "read")
	}
	r := a.Read
	note := ""
	switch {
	case r.Truncated:
		note = fmt.Sprintf("\n[cut at line %d; read on with offset %d]", r.EndLine, r.EndLine+1)
	case r.EndLine < r.StartLine:
		note = fmt.Sprintf("[no line from %d; the file has %d]", r.StartLine, r.TotalLines)
	}
	return text(false, "%s%s", r.Content, note), r, nil
}

func (t *tools) write(ctx context.Context, _ *gomcp.CallToolRequest, in WriteInput) (*gomcp.CallToolResult, *fileop.Written, error) {
	if len(in.Content) > fileop.MaxWrite {
		return nil, nil, fmt.Errorf("content is longer than %d bytes", fileop.MaxWrite)
	}
	a, err := t.runHelper(ctx, fileop.OpWrite, nil, in.Path, []byte(in.Content))
	if err != nil || a.Write == nil {
		return nil, nil, orMissing(err, "write")
	}
	return text(false, "wrote %d bytes to %s", a.Write.Bytes, shown(a.Write.Path)), a.Write, nil
}

func (t *tools) edit(ctx context.Context, _ *gomcp.CallToolRequest, in EditInput) (*gomcp.CallToolResult, *fileop.Edited, error) {
	if in.OldText == "" {
		return nil, nil, errors.New("old_text is empty; use write_file to write a whole file")
	}
	payload, err := json.Marshal(fileop.Edit{Old: in.OldText, New: in.NewText, ReplaceAll: in.ReplaceAll})
	if err != nil {
		return nil, nil, err
	}
	if len(payload) > fileop.MaxWrite {
		return nil, nil, fmt.Errorf("old_text and new_text together pass %d bytes", fileop.MaxWrite)
	}
	a, err := t.runHelper(ctx, fileop.OpEdit, nil, in.Path, payload)
	if err != nil || a.Edit == nil {
		return nil, nil, orMissing(err, "edit")
	}
	return text(false, "replaced %d occurrence(s) in %s", a.Edit.Replacements, shown(a.Edit.Path)), a.Edit, nil
}

func (t *tools) list(ctx context.Context, _ *gomcp.CallToolRequest, in ListInput) (*gomcp.CallToolResult, *fileop.Listing, error) {
	if in.MaxEntries < 0 || in.MaxEntries > fileop.MaxEntries {
		return nil, nil, fmt.Errorf("max_entries must be between 0 and %d", fileop.MaxEntries)
	}
	if in.Path == "" {
		in.Path = "."
	}
	flags := []string{}
	if in.Recursive {
		flags = append(flags, "--recursive")
	}
	if in.MaxEntries > 0 {
		flags = append(flags, "--max-entries", strconv.Itoa(in.MaxEntries))
	}
	a, err := t.runHelper(ctx, fileop.OpList, flags, in.Path, nil)
	if err != nil || a.List == nil {
		return nil, nil, orMissing(err, "list")
	}
	l := a.List
	var b strings.Builder
	for _, e := range l.Entries {
		suffix := ""
		if e.Type == "dir" {
			suffix = "/"
		} else if e.Type != "file" {
			suffix = " (" + e.Type + ")"
		}
		fmt.Fprintf(&b, "%s%s\n", shown(e.Path), suffix)
	}
	if l.Truncated {
		fmt.Fprintf(&b, "[cut at %d entries]\n", len(l.Entries))
	}
	return text(false, "%s", b.String()), l, nil
}

// orMissing is err, or the error of an answer that lacks its result.
func orMissing(err error, op string) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%s: the helper gave no answer", op)
}
