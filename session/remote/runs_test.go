package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/gate"
	gatewire "github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/server/api"
)

const runID = "20261129T201530Z-3fa9c1"

// TestGateAndRunOperations: the gate, run and stage calls send their routes of the
// table, with their bodies as the server decodes them, and return what it answered.
func TestGateAndRunOperations(t *testing.T) {
	pending := gatewire.Pending{ID: "r1", Run: runID, Gate: "push", Argv: []string{"git", "push"}}
	var bodies []any
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		bodies = append(bodies, body)
		switch rt.Method + " " + rt.Path {
		case "GET /v1/gates":
			writeAPIJSON(w, 200, api.GateList(gate.NewList([]gatewire.Pending{pending})))
		case "GET /v1/gates/{id}":
			writeAPIJSON(w, 200, api.GateShow(gate.NewShow(pending)))
		case "POST /v1/gates/{id}/approve":
			writeAPIJSON(w, 200, api.GateDecision{ID: "r1", Decision: "approved", By: "acme/lead"})
		case "POST /v1/gates/{id}/deny":
			writeAPIJSON(w, 200, api.GateDecision{ID: "r1", Decision: "denied", By: "acme/lead"})
		case "GET /v1/runs":
			writeAPIJSON(w, 200, api.RunList{Schema: audit.SchemaLs, Runs: []audit.ListedRun{{ID: runID}}})
		case "GET /v1/runs/{id}":
			writeAPIJSON(w, 200, api.RunShow{Run: runID, Events: []audit.Record{{Seq: 1}}})
		case "GET /v1/runs/{id}/verify":
			writeAPIJSON(w, 200, api.RunVerify{Run: runID, OK: true, Lines: 4})
		case "GET /v1/runs/{id}/export":
			if r.URL.Query().Get("format") != "ocsf" {
				t.Errorf("export format %q", r.URL.Query().Get("format"))
			}
			w.Header().Set("Content-Type", api.NDJSON)
			fmt.Fprint(w, "{\"a\":1}\n{\"b\":2}\n")
		case "POST /v1/runs/{id}/apply":
			writeAPIJSON(w, 200, api.StageResult{Run: runID, Paths: []string{"a.txt"}, Pending: 1, By: "acme/lead"})
		case "POST /v1/runs/{id}/discard":
			writeAPIJSON(w, 200, api.StageResult{Run: runID, Paths: []string{"b.txt"}, By: "acme/lead"})
		default:
			t.Errorf("unexpected %s %s", rt.Method, rt.Path)
		}
	}
	c := serveTLS(t, f)
	ctx := context.Background()
	if l, err := c.Gates(ctx); err != nil || len(l.Pending) != 1 || l.Pending[0].ID != "r1" {
		t.Fatalf("Gates: %+v, %v", l, err)
	}
	if s, err := c.Gate(ctx, "r1"); err != nil || s.Request.Gate != "push" {
		t.Fatalf("Gate: %+v, %v", s, err)
	}
	if d, err := c.Decide(ctx, "r1", false, ""); err != nil || d.Decision != "approved" {
		t.Fatalf("approve: %+v, %v", d, err)
	}
	if d, err := c.Decide(ctx, "r1", true, "not today"); err != nil || d.Decision != "denied" {
		t.Fatalf("deny: %+v, %v", d, err)
	}
	if l, err := c.Runs(ctx); err != nil || len(l.Runs) != 1 || l.Runs[0].ID != runID {
		t.Fatalf("Runs: %+v, %v", l, err)
	}
	if s, err := c.Run(ctx, runID); err != nil || len(s.Events) != 1 {
		t.Fatalf("Run: %+v, %v", s, err)
	}
	if v, err := c.Verify(ctx, runID); err != nil || !v.OK || v.Lines != 4 {
		t.Fatalf("Verify: %+v, %v", v, err)
	}
	var out bytes.Buffer
	if err := c.Export(ctx, runID, api.FormatOCSF, &out); err != nil || out.String() != "{\"a\":1}\n{\"b\":2}\n" {
		t.Fatalf("Export: %q, %v", out.String(), err)
	}
	if res, err := c.Apply(ctx, runID, []string{"a.txt"}, true); err != nil || !slices.Equal(res.Paths, []string{"a.txt"}) || res.Pending != 1 {
		t.Fatalf("Apply: %+v, %v", res, err)
	}
	if res, err := c.Discard(ctx, runID); err != nil || !slices.Equal(res.Paths, []string{"b.txt"}) {
		t.Fatalf("Discard: %+v, %v", res, err)
	}
	want := []string{"GET /v1/gates", "GET /v1/gates/r1", "POST /v1/gates/r1/approve", "POST /v1/gates/r1/deny",
		"GET /v1/runs", "GET /v1/runs/" + runID, "GET /v1/runs/" + runID + "/verify", "GET /v1/runs/" + runID + "/export",
		"POST /v1/runs/" + runID + "/apply", "POST /v1/runs/" + runID + "/discard"}
	if got := f.requests(); !slices.Equal(got, want) {
		t.Errorf("requests %q; want %q", got, want)
	}
	wantBodies := []any{nil, nil, nil, api.DenyRequest{Why: "not today"}, nil, nil, nil, nil, api.ApplyRequest{Paths: []string{"a.txt"}, Force: true}, nil}
	for i := range wantBodies {
		if i < len(bodies) && !equalJSON(bodies[i], wantBodies[i]) {
			t.Errorf("body %d: %+v; want %+v", i, bodies[i], wantBodies[i])
		}
	}
}

// TestRunErrors: a 404 of a run or gate is ErrNoRun or ErrNoRequest (the server says
// the same of another tenant's), an apply's 409 a *StageError with the conflicts, an
// export's 409 ErrNotIntact; an id no run can have is refused before it names a path.
func TestRunErrors(t *testing.T) {
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/apply"):
			writeAPIJSON(w, 409, api.Error{Error: "the workspace changed", Conflicts: []string{"a.txt"}, Refused: []string{"x: no"}})
		case strings.HasSuffix(r.URL.Path, "/export"):
			writeAPIError(w, 409, runID+": NOT INTACT: line 3: edited: hash")
		default:
			writeAPIError(w, 404, "no run")
		}
	}
	c := serveTLS(t, f)
	ctx := context.Background()
	if _, err := c.Verify(ctx, runID); !errors.Is(err, ErrNoRun) {
		t.Errorf("Verify of a missing run: %v; want ErrNoRun", err)
	}
	if _, err := c.Discard(ctx, runID); !errors.Is(err, ErrNoRun) {
		t.Errorf("Discard of a missing run: %v; want ErrNoRun", err)
	}
	if _, err := c.Gate(ctx, "r1"); !errors.Is(err, ErrNoRequest) {
		t.Errorf("Gate of a missing request: %v; want ErrNoRequest", err)
	}
	if _, err := c.Decide(ctx, "r1", false, ""); !errors.Is(err, ErrNoRequest) {
		t.Errorf("approve of a missing request: %v; want ErrNoRequest", err)
	}
	_, err := c.Apply(ctx, runID, nil, false)
	var se *StageError
	if !errors.As(err, &se) || se.Msg != "the workspace changed" || !slices.Equal(se.Conflicts, []string{"a.txt"}) || !slices.Equal(se.Refused, []string{"x: no"}) {
		t.Errorf("Apply with a conflict: %#v", err)
	}
	if err := c.Export(ctx, runID, api.FormatJSONL, &bytes.Buffer{}); !errors.Is(err, ErrNotIntact) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("Export of a log that does not verify: %v", err)
	}
	n := len(f.requests())
	for _, id := range []string{"../x", "a/b", "a.b", ""} {
		if _, err := c.Run(ctx, id); !errors.Is(err, ErrNoRun) {
			t.Errorf("Run(%q): %v; want ErrNoRun", id, err)
		}
	}
	if len(f.requests()) != n {
		t.Errorf("a request for an id no run can have: %q", f.requests()[n:])
	}
}

// TestFollowStream: lines reach the writer as they come; a last line that is an
// api.Error ends the follow with the error, not written out; a stream cut within a
// line is an error.
func TestFollowStream(t *testing.T) {
	var stream string
	f := &fakeServer{t: t, token: testToken}
	f.answer = func(w http.ResponseWriter, r *http.Request, rt api.Route, body any) {
		w.Header().Set("Content-Type", api.NDJSON)
		fmt.Fprint(w, stream)
	}
	c := serveTLS(t, f)
	long := strings.Repeat("x", 200<<10) // past the reader's buffer
	for _, tc := range []struct {
		name, stream, want string
		err                error
		errText            string
	}{
		{"sealed", "{\"v\":1}\n{\"v\":2}\n", "{\"v\":1}\n{\"v\":2}\n", nil, ""},
		{"a long line", "{\"v\":\"" + long + "\"}\n", "{\"v\":\"" + long + "\"}\n", nil, ""},
		{"not intact", "{\"v\":1}\n{\"error\":\"" + runID + ": NOT INTACT: line 2: edited: x\"}\n", "{\"v\":1}\n", ErrNotIntact, "line 2: edited"},
		{"unsealed", "{\"v\":1}\n{\"error\":\"the run ended unsealed\"}\n", "{\"v\":1}\n", nil, "ended unsealed"},
		{"cut", "{\"v\":1}\n{\"v\":", "{\"v\":1}\n{\"v\":", nil, "within a line"},
	} {
		stream = tc.stream
		var out bytes.Buffer
		err := c.Follow(context.Background(), runID, api.FormatJSONL, &out)
		if out.String() != tc.want {
			t.Errorf("%s: wrote %.80q; want %.80q", tc.name, out.String(), tc.want)
		}
		switch {
		case tc.err != nil && !errors.Is(err, tc.err), tc.errText == "" && err != nil, tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)):
			t.Errorf("%s: %v; want %v %q", tc.name, err, tc.err, tc.errText)
		}
	}
}
