package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// followPoll is how often [Follow] looks for new lines at the end of a live log.
const followPoll = 100 * time.Millisecond

// maxFollowLine bounds one line as Follow reads it (cordon's own lines are far smaller:
// patches over DefaultMaxInlinePatch go to files of their own).
const maxFollowLine = 16 << 20

// FollowOptions says how [Follow] reads a log that is still being written.
type FollowOptions struct {
	// Live reports whether the run that writes the log may still append to it. Follow
	// asks it each time it reaches the end of the log without the run.end seal; when it
	// says no and nothing more came, the log is incomplete (ErrTruncated).
	Live func() bool
	// Poll is how often to look for new lines; 0 means 100 ms.
	Poll time.Duration
}

// Follow calls emit with each line of the log at path (without its newline) and its
// record, in order, as the run appends them, until the run.end seal or until ctx is
// done. Every line is checked as [Verify] checks it (hash, canonical form, sequence,
// chain and the patch file an fs.diff names) before emit sees it, so a collector never
// receives a line that does not verify: a bad line ends Follow with its [VerifyError].
func Follow(ctx context.Context, path string, o FollowOptions, emit func(line []byte, rec Record) error) (Report, error) {
	if o.Poll <= 0 {
		o.Poll = followPoll
	}
	rep := Report{Path: path}
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("following: %w", err)
	}
	defer f.Close()
	fl := follower{rep: &rep, dir: filepath.Dir(path), br: bufio.NewReaderSize(f, 64<<10), seqs: map[int64]bool{}}
	for !rep.Sealed {
		line, complete, err := fl.next()
		if err != nil {
			return rep, err
		}
		if complete {
			if err := fl.check(line, emit); err != nil {
				return rep, err
			}
			continue
		}
		// At the end of what is written: wait for more while the run may append.
		live := o.Live != nil && o.Live()
		if !live {
			if line, complete, err = fl.next(); err == nil && complete { // appended meanwhile
				if err := fl.check(line, emit); err != nil {
					return rep, err
				}
				continue
			}
			p := &VerifyError{rep.Lines + 1, ErrTruncated, "no run.end seal and the run is no longer running"}
			rep.Problem = p
			return rep, p
		}
		select {
		case <-ctx.Done():
			return rep, context.Cause(ctx)
		case <-time.After(o.Poll):
		}
	}
	return rep, nil
}

// follower reads a growing log line by line, keeping a partial last line until it is
// complete.
type follower struct {
	rep     *Report
	dir     string
	br      *bufio.Reader
	partial []byte
	seqs    map[int64]bool // always empty: a live log has no later lines to tell moves by
}

// next returns the next complete line (without its newline), or complete false at the
// current end of the file.
func (fl *follower) next() ([]byte, bool, error) {
	for {
		chunk, err := fl.br.ReadSlice('\n')
		fl.partial = append(fl.partial, chunk...)
		if len(fl.partial) > maxFollowLine {
			return nil, false, &VerifyError{fl.rep.Lines + 1, ErrMalformed, fmt.Sprintf("line longer than %d bytes", maxFollowLine)}
		}
		switch {
		case err == nil:
			line := bytes.TrimSuffix(fl.partial, []byte("\n"))
			fl.partial = nil
			return line, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, false, nil
		default:
			return nil, false, fmt.Errorf("following: %w", err)
		}
	}
}

// check verifies one complete line in its place and hands it to emit.
func (fl *follower) check(line []byte, emit func([]byte, Record) error) error {
	n := fl.rep.Lines + 1
	rec, p := checkLine(n, line)
	if p == nil {
		p = checkPlace(fl.rep, n, rec, fl.seqs)
	}
	if p == nil && rec.Type == event.FSDiff {
		p = checkPatchFile(n, rec, fl.dir, fl.rep)
	}
	if p != nil {
		fl.rep.Problem = p
		return p
	}
	fl.rep.Lines, fl.rep.Head = n, rec.Hash
	fl.rep.Sealed = fl.rep.Sealed || rec.Type == event.RunEnd
	return emit(line, rec)
}
