package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/auth"
)

// auditHandlers serves the audit routes over the caller's tenant's audit root, through
// the same functions as `cordon audit` (package audit): another tenant's run is not
// under this root, so it is 404 exactly as one that does not exist.
func (s *Server) auditHandlers() map[string]handler {
	return map[string]handler{
		"GET /v1/runs":             s.listRuns,
		"GET /v1/runs/{id}":        s.bounded(s.logDocs, s.showRun, api.RoleAuditor),
		"GET /v1/runs/{id}/verify": s.verifyRun,
		"GET /v1/runs/{id}/export": s.exportRun,
		"GET /v1/runs/{id}/follow": s.followRun,
		"POST /v1/runs/prune":      s.pruneRuns,
	}
}

func (s *Server) listRuns(w http.ResponseWriter, _ *http.Request, id auth.Identity) {
	root := s.tenantOf(id).AuditRoot()
	runs, err := audit.List(root)
	if err != nil {
		s.internal(w, id, "listing runs", err)
		return
	}
	writeJSON(w, http.StatusOK, api.RunList(audit.NewListing(root, runs)))
}

// openRun opens the request's {id} in the tenant's audit root. The id is validated
// before it names a path. On a failure it has answered: 400 for a malformed id, 404
// for one that is not this tenant's run.
func (s *Server) openRun(w http.ResponseWriter, r *http.Request, id auth.Identity) (audit.Run, bool) {
	rid := r.PathValue("id")
	if audit.ValidateRunID(rid) != nil {
		writeError(w, http.StatusBadRequest, "invalid run id (like 20261129T201530Z-3fa9c1)")
		return audit.Run{}, false
	}
	run, err := audit.Open(s.tenantOf(id).AuditRoot(), rid)
	switch {
	case errors.Is(err, audit.ErrRunNotFound):
		writeError(w, http.StatusNotFound, "no run "+rid)
		return audit.Run{}, false
	case err != nil:
		s.internal(w, id, "opening run", err)
		return audit.Run{}, false
	}
	return run, true
}

// maxShowBytes bounds the log a show answers: the whole log is read into memory (its
// document written one event at a time, writeShown), and a sandbox can grow its log
// by a megabyte a command. A larger log is 409; its export streams it. How many shows
// the daemon answers at once is bounded too (held.go, maxLogDocs).
const maxShowBytes = 32 << 20

func (s *Server) showRun(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	run, ok := s.openRun(w, r, id)
	if !ok {
		return
	}
	if fi, err := os.Stat(run.EventsPath()); err == nil && fi.Size() > maxShowBytes {
		writeError(w, http.StatusConflict, fmt.Sprintf("run %s: its log is %d bytes, more than the %d a show answers; GET /v1/runs/%s/export streams it",
			run.ID, fi.Size(), maxShowBytes, run.ID))
		return
	}
	recs, err := audit.ReadEvents(run.EventsPath())
	// A live run's last line may be half written: its complete lines are the run so far.
	if err != nil && !errors.Is(err, audit.ErrTruncated) {
		s.internal(w, id, "reading run", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_ = writeShown(w, api.RunShow(audit.NewShown(run.ID, recs)))
}

// writeShown writes sh as json.Encoder would, one event at a time: the log's records
// are in memory once, never their whole document beside them.
func writeShown(w io.Writer, sh api.RunShow) error {
	head := sh
	head.Events = nil
	b, err := json.Marshal(head)
	if err != nil {
		return err
	}
	// The events are the document's last field: its head without them, then each.
	b, ok := bytes.CutSuffix(b, []byte(`,"events":null}`))
	if !ok {
		return fmt.Errorf("show: unexpected document head %.80q", b)
	}
	if sh.Events == nil {
		_, err := fmt.Fprintf(w, "%s,\"events\":null}\n", b)
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(b)
	bw.WriteString(`,"events":[`)
	for i, r := range sh.Events {
		if i > 0 {
			bw.WriteByte(',')
		}
		e, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := bw.Write(e); err != nil {
			return err
		}
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

func (s *Server) verifyRun(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	run, ok := s.openRun(w, r, id)
	if !ok {
		return
	}
	rep, err := audit.Verify(run.EventsPath())
	if err != nil && rep.Problem == nil {
		s.internal(w, id, "verifying run", err)
		return
	}
	writeJSON(w, http.StatusOK, api.RunVerify(audit.NewVerified(run.ID, rep)))
}

// streamFormat is ?format= of export and follow; on a bad one it has answered 400.
func streamFormat(w http.ResponseWriter, r *http.Request) (string, bool) {
	switch f := r.URL.Query().Get("format"); f {
	case "", api.FormatJSONL:
		return api.FormatJSONL, true
	case api.FormatOCSF:
		return f, true
	}
	writeError(w, http.StatusBadRequest, "format: want jsonl or ocsf")
	return "", false
}

// exportRun streams the verified log. It is verified whole before its first byte is
// sent, so a log that does not verify is a 409 with the first bad line.
func (s *Server) exportRun(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	run, ok := s.openRun(w, r, id)
	if !ok {
		return
	}
	format, ok := streamFormat(w, r)
	if !ok {
		return
	}
	st := newLineStream(w, s.timeouts.Response)
	_, err := audit.Export(st, run.EventsPath(), audit.ExportOptions{Format: format})
	var verr *audit.VerifyError
	switch {
	case err == nil, st.started:
		return // done, or the client went (the status is sent)
	case errors.As(err, &verr):
		writeError(w, http.StatusConflict, run.ID+": NOT INTACT: "+verr.Error())
	default:
		s.internal(w, id, "exporting run", err)
	}
}

// followRun streams a run's lines as they are logged, each verified first, until its
// run.end seal, until the run is gone without one, or until the client goes. A line
// that does not verify, or a log that ends unsealed, ends the stream with one last
// line: an [api.Error].
func (s *Server) followRun(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	run, ok := s.openRun(w, r, id)
	if !ok {
		return
	}
	format, ok := streamFormat(w, r)
	if !ok {
		return
	}
	root := paths.Root(s.tenantOf(id).RunRoot())
	live := s.live
	if live == nil {
		live = runner.Live
	}
	st := newLineStream(w, s.timeouts.Response)
	out := audit.NewStream(st, format)
	_, err := audit.Follow(r.Context(), run.EventsPath(), audit.FollowOptions{Live: func() bool { return live(root, run.ID) }},
		func(line []byte, rec audit.Record) error { return out.Write(line, rec) })
	if err == nil || r.Context().Err() != nil || st.failed {
		return
	}
	var verr *audit.VerifyError
	msg := "following: the log could not be read"
	if errors.As(err, &verr) {
		msg = run.ID + ": NOT INTACT: " + verr.Error()
	} else {
		s.log.Error("following run", logTenant, id.Tenant, "run", run.ID, "error", err)
	}
	if !st.started {
		writeError(w, http.StatusConflict, msg)
		return
	}
	st.end(api.Error{Error: msg})
}

// internal answers 500 for a failure of the server's own, logged with its detail (a
// host path, say), which the caller is not told.
func (s *Server) internal(w http.ResponseWriter, id auth.Identity, what string, err error) {
	s.log.Error(what, logTenant, id.Tenant, "error", err)
	writeError(w, http.StatusInternalServerError, what+": internal error")
}
