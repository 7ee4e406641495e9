package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Export formats, for [ExportOptions.Format].
const (
	FormatJSONL = "jsonl" // the log's own lines, byte for byte
	FormatOCSF  = "ocsf"  // one OCSF event object per line; see docs/audit.md
)

// ExportOptions says how [Export] writes a run.
type ExportOptions struct {
	Format string // FormatJSONL or FormatOCSF
	// Force exports a log that does not verify (edited, truncated, unsealed): as far as
	// it can be read, for OCSF. Without it such a log is refused.
	Force bool
}

// Export verifies the log at path and writes it to w in the format o names. A log that
// is not intact and sealed is refused with its [VerifyError] (unless o.Force), so what
// leaves cordon is what was written. It returns the verification report either way.
func Export(w io.Writer, path string, o ExportOptions) (Report, error) {
	if o.Format != FormatJSONL && o.Format != FormatOCSF {
		return Report{}, fmt.Errorf("%w: %q (want %s or %s)", ErrBadFormat, o.Format, FormatJSONL, FormatOCSF)
	}
	rep, err := Verify(path)
	if err != nil && rep.Problem == nil {
		return rep, err
	}
	if !rep.OK() && !o.Force {
		return rep, fmt.Errorf("exporting %s: the log does not verify: %w", path, rep.Problem)
	}
	if o.Format == FormatJSONL {
		return rep, copyFile(w, path)
	}
	return rep, writeOCSF(w, path, o.Force)
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("exporting: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("exporting: %w", err)
	}
	return nil
}

// writeOCSF writes the OCSF events of the log at path, one JSON object per line, a
// record at a time (a log may be larger than memory should hold); with force, as far
// as the log can be read.
func writeOCSF(w io.Writer, path string, force bool) error {
	bw := bufio.NewWriter(w)
	st := NewStream(bw, FormatOCSF)
	var werr error
	err := EachEvent(path, func(rec Record) error {
		werr = st.Write(nil, rec)
		return werr
	})
	switch {
	case werr != nil:
		return werr
	case err != nil && !force:
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("exporting: %w", err)
	}
	return nil
}

// Stream writes records one at a time in an export format, for a collector that reads
// a run live ([Follow]). Nothing is buffered: each record is written when it is given.
type Stream struct {
	w      io.Writer
	format string
	enc    *json.Encoder
	m      ocsfMapper
}

// NewStream returns a Stream writing format (FormatJSONL or FormatOCSF) to w.
func NewStream(w io.Writer, format string) *Stream {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &Stream{w: w, format: format, enc: enc, m: ocsfMapper{argv: map[string][]string{}}}
}

// Write writes one record: its line as the log has it (jsonl), or its OCSF events.
func (s *Stream) Write(line []byte, rec Record) error {
	if s.format == FormatJSONL {
		if _, err := s.w.Write(append(line[:len(line):len(line)], '\n')); err != nil {
			return fmt.Errorf("exporting: %w", err)
		}
		return nil
	}
	for _, e := range s.m.events(rec) {
		if err := s.enc.Encode(e); err != nil {
			return fmt.Errorf("exporting: %w", err)
		}
	}
	return nil
}
