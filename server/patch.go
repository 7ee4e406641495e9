package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
)

// sessionPatch answers the session's workspace changes as its audit log recorded
// them, command by command (audit.WritePatch: nothing recomputed), as one unified
// diff. A session's run has the session's id. X-Cordon-Patch-Incomplete counts the
// patches the log kept only the start of.
//
// The log is read twice, a record at a time, never held whole: a sandbox grows it by
// up to a megabyte a command (an exec's argv), and 32 patches of a log of gigabytes,
// each read into memory, would take the server down for every tenant. The first pass
// counts, for the header; the second writes, and stops where the first did, so a
// live log's header and body agree.
func (s *Server) sessionPatch(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	_, rec, ok := s.lookup(w, r, id)
	if !ok {
		return
	}
	run, err := audit.Open(s.tenantOf(id).AuditRoot(), rec.ID)
	if errors.Is(err, audit.ErrRunNotFound) {
		writeError(w, http.StatusNotFound, "the session has no audit log")
		return
	}
	if err != nil {
		s.internal(w, id, "opening the session's run", err)
		return
	}
	n, incomplete := 0, 0
	err = audit.EachEvent(run.EventsPath(), func(rec audit.Record) error {
		n++
		if incompletePatch(rec) {
			incomplete++
		}
		return nil
	})
	if err != nil && !errors.Is(err, audit.ErrTruncated) { // a live run's last line may be half written
		s.internal(w, id, "reading the session's run", err)
		return
	}
	if _, ok := extendDeadlines(w, transferTimeout); !ok {
		return
	}
	w.Header().Set("Content-Type", api.Patch)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Cordon-Patch-Incomplete", strconv.Itoa(incomplete))
	// Streamed: a patch file is checked against its digest before a byte of it is
	// written, so a failure past the first byte is a read error; the connection is then
	// dropped, and the client sees a cut stream, not a short patch that looks whole.
	written := 0
	err = audit.EachEvent(run.EventsPath(), func(rec audit.Record) error {
		if written == n {
			return errCounted
		}
		written++
		_, err := audit.WritePatch(w, run, []audit.Record{rec})
		return err
	})
	if err != nil && !errors.Is(err, errCounted) && !(errors.Is(err, audit.ErrTruncated) && written == n) {
		s.log.Warn("session patch cut short", logTenant, id.Tenant, "session", rec.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// errCounted ends a patch's second pass at the records its first counted.
var errCounted = errors.New("the records counted are written")

// incompletePatch reports whether rec is an fs.diff line whose patch the log kept only
// the start of.
func incompletePatch(rec audit.Record) bool {
	var d audit.FSDiff
	return rec.Type == event.FSDiff && rec.DecodeBody(&d) == nil && d.PatchTruncated && d.PatchFile == ""
}
