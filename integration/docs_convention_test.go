package integration

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Docs that run. Every fenced block tagged sh, bash, shell or console in README.md and
// docs/*.md is an example a reader will paste, so TestDocsRun runs it (docs_run_test.go).
// The convention, for whoever writes the docs:
//
//   - A block is a bash script run with `set -e -o pipefail` in a fresh workspace of
//     its own file's world (one per Markdown file, so a later block sees what an earlier
//     one did: `audit show last` shows the run above it), with `cordon` on PATH, its own
//     run root and audit root, $CORDON_SRC naming the cordon checkout, and nothing
//     else of the caller's. It must exit 0.
//   - console blocks: only lines starting with "$ " (and their "\" continuations) are
//     run; the other lines are output and are not compared.
//   - Synopses with placeholders ([--json], FILE, ID) are not shell: put them in an
//     untagged block, or write the concrete command.
//   - Markers are HTML comments (invisible on GitHub) on the lines right before the
//     fence, one or more:
//     <!-- doc-test: skip REASON -->   not run; REASON is required. Keep these rare:
//     only for what cannot run in a test (it runs the test suite itself, needs
//     the internet, a person, or another machine).
//     <!-- doc-test: exit N -->        the block's status must be N instead of 0.
//     <!-- doc-test: setup             a script run first, in the same workspace, for the
//     SCRIPT                           files the reader's project would already hold
//     -->                              (a Makefile, a log); it must exit 0.
//   - A marker not followed by a shell block, an unknown marker word, or a skip without
//     a reason fails the test: a typo must not silently stop a block from running.

// docBlock is one shell example of a Markdown file.
type docBlock struct {
	file   string
	line   int    // the fence's line, 1-based
	lang   string // sh, bash, shell or console
	script string // the commands (for console, the "$ " lines without the prompt)
	setup  string // a doc-test: setup script, or ""
	skip   string // the reason a doc-test: skip gave, or ""
	exit   int    // the status the block must end with
}

func (b docBlock) name() string { return b.file + ":" + strconv.Itoa(b.line) }

// shellLangs are the fence tags whose blocks run.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

const markerPrefix = "<!-- doc-test:"

// parseDocBlocks returns the shell blocks of one Markdown file, in order, with their
// markers; every misplaced or malformed marker is an error.
func parseDocBlocks(file, text string) ([]docBlock, error) {
	var (
		out     []docBlock
		errs    []error
		pending *docBlock // markers seen since the last non-marker line
		pendAt  int
	)
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(trimmed, markerPrefix):
			if pending == nil {
				pending, pendAt = &docBlock{}, i+1
			}
			end, err := parseMarker(lines, i, pending)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %w", file, i+1, err))
			}
			i = end
		case strings.HasPrefix(trimmed, "```"):
			fence := trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
			lang := strings.TrimSpace(trimmed[len(fence):])
			body, end := fencedBody(lines, i+1, fence)
			if shellLangs[lang] {
				b := docBlock{file: file, line: i + 1, lang: lang}
				if pending != nil {
					b.setup, b.skip, b.exit = pending.setup, pending.skip, pending.exit
				}
				b.script = body
				if lang == "console" {
					b.script = consoleCommands(body)
				}
				out = append(out, b)
			} else if pending != nil {
				errs = append(errs, fmt.Errorf("%s:%d: a doc-test marker before a %q block, which does not run", file, pendAt, lang))
			}
			pending, i = nil, end
		default:
			if pending != nil {
				errs = append(errs, fmt.Errorf("%s:%d: a doc-test marker not right before a shell block", file, pendAt))
				pending = nil
			}
		}
	}
	if pending != nil {
		errs = append(errs, fmt.Errorf("%s:%d: a doc-test marker at the end of the file", file, pendAt))
	}
	return out, errors.Join(errs...)
}

// parseMarker reads the marker starting at lines[i] into b and returns the index of its
// last line.
func parseMarker(lines []string, i int, b *docBlock) (int, error) {
	rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), markerPrefix))
	word, arg, _ := strings.Cut(rest, " ")
	switch word {
	case "setup":
		if strings.TrimSpace(arg) != "" {
			return i, errors.New("doc-test: setup takes its script on the following lines, up to -->")
		}
		var script []string
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "-->" {
				b.setup += strings.Join(script, "\n") + "\n"
				return j, nil
			}
			script = append(script, lines[j])
		}
		return len(lines) - 1, errors.New("doc-test: setup has no closing -->")
	case "skip", "exit":
		arg, ok := strings.CutSuffix(strings.TrimSpace(arg), "-->")
		arg = strings.TrimSpace(arg)
		if !ok {
			return i, fmt.Errorf("doc-test: %s must end with --> on the same line", word)
		}
		if word == "skip" {
			if arg == "" {
				return i, errors.New("doc-test: skip needs a reason")
			}
			b.skip = arg
			return i, nil
		}
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 255 {
			return i, fmt.Errorf("doc-test: exit wants a status 0-255, not %q", arg)
		}
		b.exit = n
		return i, nil
	}
	return i, fmt.Errorf("doc-test: unknown marker %q (skip, exit or setup)", word)
}

// fencedBody returns the lines from start up to the closing fence, and the index of the
// closing fence (or the last line when there is none).
func fencedBody(lines []string, start int, fence string) (string, int) {
	var body []string
	for j := start; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == fence {
			return strings.Join(body, "\n") + "\n", j
		}
		body = append(body, lines[j])
	}
	return strings.Join(body, "\n") + "\n", len(lines) - 1
}

// consoleCommands keeps the "$ " lines of a console block, and the lines continuing them.
func consoleCommands(body string) string {
	var out []string
	cont := false
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case cont:
			out = append(out, l)
		case strings.HasPrefix(l, "$ "):
			out = append(out, strings.TrimPrefix(l, "$ "))
		default:
			continue
		}
		cont = strings.HasSuffix(l, "\\")
	}
	return strings.Join(out, "\n") + "\n"
}

// TestParseDocBlocks holds the convention above to its word: markers attach to the next
// shell block, and every mistake in them is an error rather than a block silently not run.
func TestParseDocBlocks(t *testing.T) {
	md := strings.Join([]string{
		"# t", "", "```sh", "cordon backends", "```", "",
		"<!-- doc-test: setup", "printf 'all:\\n' > Makefile", "-->", "<!-- doc-test: exit 1 -->",
		"```bash", "make; false", "```",
		"<!-- doc-test: skip needs the internet -->", "```shell", "curl https://example.com", "```",
		"```console", "$ cordon check \\", "  -c x.yaml", "x.yaml: valid", "$ cordon gc", "```",
		"```yaml", "version: 1", "```",
	}, "\n")
	got, err := parseDocBlocks("t.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{file: "t.md", line: 3, lang: "sh", script: "cordon backends\n"},
		{file: "t.md", line: 11, lang: "bash", script: "make; false\n", setup: "printf 'all:\\n' > Makefile\n", exit: 1},
		{file: "t.md", line: 15, lang: "shell", script: "curl https://example.com\n", skip: "needs the internet"},
		{file: "t.md", line: 18, lang: "console", script: "cordon check \\\n  -c x.yaml\ncordon gc\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks %+v; want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d: got %+v; want %+v", i, got[i], want[i])
		}
	}
	for name, bad := range map[string]string{
		"skip without a reason": "<!-- doc-test: skip -->\n```sh\ntrue\n```\n",
		"unknown marker":        "<!-- doc-test: skpi flaky -->\n```sh\ntrue\n```\n",
		"bad exit":              "<!-- doc-test: exit one -->\n```sh\ntrue\n```\n",
		"marker before yaml":    "<!-- doc-test: skip x -->\n```yaml\nversion: 1\n```\n",
		"marker before prose":   "<!-- doc-test: skip x -->\nsome text\n```sh\ntrue\n```\n",
		"marker at the end":     "```sh\ntrue\n```\n<!-- doc-test: exit 2 -->\n",
		"unclosed setup":        "<!-- doc-test: setup\ntouch x\n```sh\ntrue\n```\n",
	} {
		if _, err := parseDocBlocks("t.md", bad); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}
