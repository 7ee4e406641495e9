package fileop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Main runs `internal file OP PATH [flags]` (args after "file") and returns its exit
// status: 0 with the answer on stdout, 1 with {"error": ...}, 2 for a malformed call.
func Main(args []string, stdin io.Reader, stdout io.Writer) int {
	a, err := run(args, stdin)
	if err != nil {
		a = Answer{Error: err.Error()}
	}
	if e := json.NewEncoder(stdout).Encode(a); e != nil {
		return 1
	}
	var usage usageError
	switch {
	case errors.As(err, &usage):
		return 2
	case err != nil:
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdin io.Reader) (Answer, error) {
	if len(args) == 0 {
		return Answer{}, usageError{"internal file: give an operation (read, write, edit, list)"}
	}
	op := args[0]
	fl := flag.NewFlagSet("internal file "+op, flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	offset := fl.Int("offset", 1, "first line (read)")
	limit := fl.Int("limit", 0, "lines, 0: to the end (read)")
	maxChars := fl.Int("max-chars", DefaultReadChars, "character cap (read)")
	recursive := fl.Bool("recursive", false, "descend (list)")
	maxEntries := fl.Int("max-entries", DefaultEntries, "entry cap (list)")
	if err := fl.Parse(args[1:]); err != nil {
		return Answer{}, usageError{err.Error()}
	}
	if fl.NArg() != 1 || fl.Arg(0) == "" {
		return Answer{}, usageError{"internal file " + op + ": give one PATH"}
	}
	path := fl.Arg(0)
	switch op {
	case OpRead:
		r, err := read(path, *offset, *limit, min(max(*maxChars, 1), MaxReadChars))
		return Answer{Read: r}, err
	case OpWrite:
		w, err := write(path, stdin)
		return Answer{Write: w}, err
	case OpEdit:
		e, err := edit(path, stdin)
		return Answer{Edit: e}, err
	case OpList:
		l, err := list(path, *recursive, min(max(*maxEntries, 1), MaxEntries))
		return Answer{List: l}, err
	}
	return Answer{}, usageError{fmt.Sprintf("internal file: unknown operation %q", op)}
}

// openRegular opens path for reading without blocking and refuses anything but a
// regular file (a FIFO, a device, a directory).
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a regular file (%s)", path, kind(fi.Mode()))
	}
	return f, fi, nil
}

// binary says why data (a file's start) is not text, or "".
func binary(data []byte) string {
	if bytes.IndexByte(data, 0) >= 0 {
		return "it holds a NUL byte"
	}
	return ""
}

func read(path string, offset, limit, maxChars int) (*ReadResult, error) {
	if offset < 1 {
		return nil, usageError{"read: offset counts lines from 1"}
	}
	if limit < 0 {
		return nil, usageError{"read: limit must not be negative"}
	}
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniff); binary(head) != "" {
		return nil, fmt.Errorf("%s: a binary file (%s); read it with exec (od, xxd, file)", path, binary(head))
	}
	r := &ReadResult{Path: path, StartLine: offset, EndLine: offset - 1, TotalLines: -1, Size: fi.Size()}
	var b strings.Builder
	n := 0
	for {
		line, err := readLine(br)
		if line == nil && err != nil {
			if errors.Is(err, io.EOF) {
				r.TotalLines = n
				return r.done(&b)
			}
			return nil, err
		}
		n++
		if n < offset {
			continue
		}
		if limit > 0 && n >= offset+limit {
			return r.done(&b)
		}
		if bytes.IndexByte(line, 0) >= 0 || !utf8.Valid(line) {
			return nil, fmt.Errorf("%s: line %d is not UTF-8 text (a binary file?); read it with exec", path, n)
		}
		if len(line) > MaxLineChars {
			line = append(line[:MaxLineChars:MaxLineChars], []byte(" [line cut by cordon]\n")...)
			r.Truncated = true
		}
		if b.Len()+len(line) > maxChars {
			r.Truncated = true
			return r.done(&b)
		}
		b.Write(line)
		r.EndLine = n
	}
}

func (r *ReadResult) done(b *strings.Builder) (*ReadResult, error) {
	r.Content = b.String()
	return r, nil
}

// readLine reads one line with its newline, keeping at most MaxLineChars+1 bytes of
// it (the rest is skipped), so a file of one huge line costs no memory.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if keep := min(len(chunk), MaxLineChars+1-len(out)); keep > 0 {
			out = append(out, chunk[:keep]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil && out[len(out)-1] != '\n' {
			out = append(out, '\n') // a cut line keeps its end
		}
		if len(out) == 0 || err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return out, nil
	}
}

// readPayload reads at most MaxWrite bytes of stdin, refusing more.
func readPayload(stdin io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(stdin, MaxWrite+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxWrite {
		return nil, fmt.Errorf("the content passes %d bytes", MaxWrite)
	}
	return data, nil
}

func write(path string, stdin io.Reader) (*Written, error) {
	data, err := readPayload(stdin)
	if err != nil {
		return nil, err
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	_, statErr := os.Stat(path)
	if err := writeFile(path, data, os.O_CREATE); err != nil {
		return nil, err
	}
	return &Written{Path: path, Bytes: len(data), Created: errors.Is(statErr, fs.ErrNotExist)}, nil
}

// writeFile writes data to path, opened without blocking (a FIFO with no reader fails
// rather than hangs) and refused unless it is a regular file; flags adds O_CREATE.
func writeFile(path string, data []byte, flags int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK|flags, 0o644)
	if errors.Is(err, syscall.ENXIO) {
		return fmt.Errorf("%s: not a regular file (a FIFO or socket)", path)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s)", path, kind(fi.Mode()))
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Close()
}

func edit(path string, stdin io.Reader) (*Edited, error) {
	payload, err := readPayload(stdin)
	if err != nil {
		return nil, err
	}
	var e Edit
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, usageError{"edit: the payload: " + err.Error()}
	}
	if e.Old == "" {
		return nil, errors.New("edit: old_text is empty; use write_file to write a whole file")
	}
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxWrite {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes, past the %d an edit rewrites", path, fi.Size(), MaxWrite)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxWrite+1))
	f.Close()
	if err != nil {
		return nil, err
	}
	if why := binary(data); why != "" {
		return nil, fmt.Errorf("%s: a binary file (%s)", path, why)
	}
	text := string(data)
	n := strings.Count(text, e.Old)
	switch {
	case n == 0:
		return nil, fmt.Errorf("%s: old_text not found (it must match exactly, whitespace included)", path)
	case n > 1 && !e.ReplaceAll:
		return nil, fmt.Errorf("%s: old_text found %d times; give more surrounding text to make it unique, or set replace_all", path, n)
	}
	if !e.ReplaceAll {
		n = 1
	}
	out := strings.Replace(text, e.Old, e.New, n)
	if len(out) > MaxWrite {
		return nil, fmt.Errorf("%s: the edited file would pass %d bytes", path, MaxWrite)
	}
	if err := writeFile(path, []byte(out), 0); err != nil {
		return nil, err
	}
	return &Edited{Path: path, Replacements: n}, nil
}

func list(path string, recursive bool, maxEntries int) (*Listing, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", path)
	}
	l := &Listing{Path: path, Entries: []Entry{}}
	errFull := errors.New("full")
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == path {
				return err
			}
			l.Skipped++
			return nil
		}
		if p == path {
			return nil
		}
		if len(l.Entries) == maxEntries {
			l.Truncated = true
			return errFull
		}
		rel, _ := filepath.Rel(path, p)
		e := Entry{Path: rel, Type: kind(d.Type())}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			e.Size = info.Size()
		}
		l.Entries = append(l.Entries, e)
		if d.IsDir() && (!recursive || d.Name() == ".git") {
			if recursive {
				l.Skipped++
			}
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return nil, err
	}
	return l, nil
}

// kind names a file type as an Entry does.
func kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	}
	return "other"
}
