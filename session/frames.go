package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/session/wire"
)

// MaxFrameLine bounds one line of an answer (a [wire.Frame]): an output chunk is at
// most a pipe read (32 KiB, base64 in JSON) and a result holds bounded lists, so a
// longer line is not an answer but a peer that would make the client use unbounded
// memory.
const MaxFrameLine = 1 << 20

// ReadExec reads the answer to an exec from r, as the supervisor's socket and the
// server's NDJSON stream both carry it: output chunks, written to o.Stdout and
// o.Stderr as they come (buffered into the result when nil), then the result or the
// error, which is an *[Error]. Every line is at most [MaxFrameLine]. id names the
// session in errors. Package session/remote reads the server's stream with it.
func ReadExec(ctx context.Context, r io.Reader, id string, o ExecOptions) (*wire.Result, error) {
	var out, errOut bytes.Buffer
	stdout, stderr := o.Stdout, o.Stderr
	if stdout == nil {
		stdout = &out
	}
	if stderr == nil {
		stderr = &errOut
	}
	lines := newLineReader(r)
	for {
		var f wire.Frame
		if err := lines.decode(&f); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &Error{Code: errdefs.ExitCannotRun, Msg: fmt.Sprintf("session %s ended before the command's result: %v", id, err)}
		}
		switch {
		case f.Error != "":
			return nil, frameError(f)
		case f.Result != nil:
			f.Result.Stdout, f.Result.Stderr = out.String(), errOut.String()
			if f.Result.DeniedEgress == nil {
				f.Result.DeniedEgress = []string{}
			}
			if f.Result.Denied == nil {
				f.Result.Denied = []wire.Denial{}
			}
			if f.Result.Alerts == nil {
				f.Result.Alerts = []wire.Alert{}
			}
			if f.Result.Gates == nil {
				f.Result.Gates = []gatewire.Decided{}
			}
			return f.Result, nil
		case f.FD == 1:
			_, _ = stdout.Write(f.Data)
		case f.FD == 2:
			_, _ = stderr.Write(f.Data)
		}
	}
}

// frameError is the *Error of an error frame: its code, 125 when it has none.
func frameError(f wire.Frame) *Error {
	code := f.Code
	if code == 0 {
		code = errdefs.ExitCannotRun
	}
	return &Error{Code: code, Msg: f.Error, NoSpace: f.NoSpace}
}

// errLongLine is a line past MaxFrameLine.
var errLongLine = fmt.Errorf("an answer line longer than %d bytes", MaxFrameLine)

// lineReader reads JSON lines of at most MaxFrameLine bytes.
type lineReader struct{ br *bufio.Reader }

func newLineReader(r io.Reader) *lineReader { return &lineReader{bufio.NewReaderSize(r, 64<<10)} }

// decode decodes the next non-empty line into v. A last line without its newline is
// read as a line.
func (l *lineReader) decode(v any) error {
	var line []byte
	for {
		chunk, err := l.br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxFrameLine {
			return errLongLine
		}
		line = append(line, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(bytes.TrimSpace(line)) > 0:
		case err != nil:
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			line = line[:0]
			continue
		}
		return json.Unmarshal(line, v)
	}
}
