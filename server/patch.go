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
	recs, err := audit.ReadEvents(run.EventsPath())
	if err != nil && !errors.Is(err, audit.ErrTruncated) { // a live run's last line may be half written
		s.internal(w, id, "reading the session's run", err)
		return
	}
	if _, ok := extendDeadlines(w, transferTimeout); !ok {
		return
	}
	w.Header().Set("Content-Type", api.Patch)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Cordon-Patch-Incomplete", strconv.Itoa(incompletePatches(recs)))
	// Streamed: a patch file is checked against its digest before a byte of it is
	// written, so a failure past the first byte is a read error; the connection is then
	// dropped, and the client sees a cut stream, not a short patch that looks whole.
	if _, err := audit.WritePatch(w, run, recs); err != nil {
		s.log.Warn("session patch cut short", logTenant, id.Tenant, "session", rec.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// incompletePatches counts the fs.diff lines whose patch the log kept only the start of.
func incompletePatches(recs []audit.Record) int {
	n := 0
	for _, rec := range recs {
		var d audit.FSDiff
		if rec.Type == event.FSDiff && rec.DecodeBody(&d) == nil && d.PatchTruncated && d.PatchFile == "" {
			n++
		}
	}
	return n
}
