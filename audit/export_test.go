package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

func TestExportJSONL(t *testing.T) {
	path := writeSampleRun(t)
	orig, _ := os.ReadFile(path)
	var out bytes.Buffer
	if rep, err := Export(&out, path, ExportOptions{Format: FormatJSONL}); err != nil || !rep.OK() {
		t.Fatalf("Export = %+v, %v", rep, err)
	}
	if !bytes.Equal(out.Bytes(), orig) {
		t.Errorf("jsonl export is not the log as is:\n%s", out.Bytes())
	}
	if _, err := Export(&out, path, ExportOptions{Format: "csv"}); !errors.Is(err, ErrBadFormat) {
		t.Errorf("csv: %v; want ErrBadFormat", err)
	}
	tampered := bytes.Replace(orig, []byte(`"make"`), []byte(`"mako"`), 1)
	if err := os.WriteFile(path, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{FormatJSONL, FormatOCSF} {
		out.Reset()
		if _, err := Export(&out, path, ExportOptions{Format: f}); !errors.Is(err, ErrEdited) || out.Len() != 0 {
			t.Errorf("%s of an edited log: %v, %d bytes; want ErrEdited and nothing written", f, err, out.Len())
		}
	}
	out.Reset()
	if rep, err := Export(&out, path, ExportOptions{Format: FormatJSONL, Force: true}); err != nil || rep.OK() || !bytes.Equal(out.Bytes(), tampered) {
		t.Errorf("--force: %+v, %v; want the edited log as is and a report that says so", rep, err)
	}
	unsealed := writeRunAt(t, t.TempDir(), "00000a", "/w", t0, false)
	if _, err := Export(&out, unsealed.EventsPath(), ExportOptions{Format: FormatJSONL}); !errors.Is(err, ErrTruncated) {
		t.Errorf("unsealed: %v; want ErrTruncated", err)
	}
}

// writeEveryType writes a sealed run with one event of every type and returns its path.
func writeEveryType(t *testing.T) string {
	t.Helper()
	w, _ := newWriter(t, Options{})
	cmd, err := w.StartCmd(CmdStart{Argv: []string{"/usr/bin/make", "test"}, Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []event.Event{
		{Type: event.NetAllow, Cmd: cmd, Body: event.NetBody{Host: "proxy.golang.org", Port: 443, Addr: "142.250.1.1:443", Rule: "proxy.golang.org:443", BytesUp: 10, BytesDown: 20}},
		{Type: event.NetDeny, Cmd: cmd, Body: event.NetBody{Host: "evil.example", Port: 443, Reason: "no rule"}},
		{Type: event.NetAllowSummary, Cmd: cmd, Body: event.NetAllowSummaryBody{Allowed: 3000, BytesUp: 11, BytesDown: 22, Destinations: 1,
			Named: map[string]event.AllowedTo{"proxy.golang.org:443": {Attempts: 3000, BytesUp: 11, BytesDown: 22}}, First: time.Unix(1, 0), Last: time.Unix(2, 0)}},
		{Type: event.CredIssue, Body: event.CredIssueBody{Name: "GH", Provider: "local", ID: "sha256:0123456789abcdef"}},
		{Type: event.SyscallAlert, Cmd: cmd, Body: event.SyscallAlertBody{PID: 7, Comm: "sh", Syscall: "ptrace", Rule: "syscall", Reason: "ptrace is not allowed", Action: "alert"}},
		{Type: event.GateRequest, Body: event.GateRequestBody{ID: "0000abcd", Gate: "push", Argv: []string{"git", "push"}}},
		{Type: event.GateApprove, Body: event.GateDecisionBody{ID: "0000abcd", Gate: "push", By: "alice"}},
		{Type: event.GateDeny, Body: event.GateDecisionBody{ID: "0000abce", Gate: "push", By: "cordon", Reason: "mode deny"}},
		{Type: event.GateExec, Body: event.GateExecBody{ID: "0000abcd", Gate: "push", Argv: []string{"git", "push"}, ExitCode: 0}},
		{Type: event.FSDiff, Cmd: cmd, Body: event.FSDiffBody{Files: 2, Changes: []event.FileChange{
			{Op: "added", Path: "out/bin", Kind: "binary", NewSize: 5, NewSHA256: strings.Repeat("ab", 32)},
			{Op: "deleted", Path: "gone.txt", Kind: "text"}}}},
		{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{ExitCode: 2}},
		{Type: event.CredRevoke, Body: event.CredRevokeBody{Name: "GH", Provider: "local", ID: "sha256:0123456789abcdef", Outcome: "failed", Alert: true}},
	} {
		if _, err := w.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(RunEnd{ExitCode: 2, Reason: ReasonExited}); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

func TestExportOCSF(t *testing.T) {
	path := writeEveryType(t)
	var out bytes.Buffer
	if _, err := Export(&out, path, ExportOptions{Format: FormatOCSF}); err != nil {
		t.Fatal(err)
	}
	type want struct {
		typ              event.Type
		class, activity  int
		status, severity int
		check            string // a JSON fragment the event must contain
	}
	wants := []want{
		{event.RunStart, 6002, 3, 0, 1, `"app":{"name":"cordon","version":"v0.0.0-test"}`},
		{event.CmdStart, 1007, 1, 0, 1, `"cmd_line":"/usr/bin/make test"`},
		{event.NetAllow, 4001, 1, 1, 1, `"dst_endpoint":{"hostname":"proxy.golang.org","ip":"142.250.1.1","port":443}`},
		{event.NetDeny, 4001, 5, 2, 2, `"action_id":2,"disposition_id":2`},
		{event.NetAllowSummary, 4001, 1, 1, 1, `"count":3000,"start_time":1000,"end_time":2000`},
		{event.CredIssue, 3001, 1, 1, 1, `"user":{"name":"GH","credential_uid":"sha256:0123456789abcdef"}`},
		{event.SyscallAlert, 2004, 1, 0, 3, `"title":"ptrace broke the syscall profile"`},
		{event.GateRequest, 0, 99, 0, 1, `"message":"gate.request"`},
		{event.GateApprove, 0, 99, 1, 1, `"status":"Success"`},
		{event.GateDeny, 0, 99, 2, 1, `"status":"Failure"`},
		{event.GateExec, 1007, 2, 1, 1, `"exit_code":0`},
		{event.FSDiff, 1001, 1, 0, 1, `"hashes":[{"algorithm_id":3,"algorithm":"SHA-256"`},
		{event.FSDiff, 1001, 4, 0, 1, `"path":"gone.txt","name":"gone.txt"`},
		{event.CmdEnd, 1007, 2, 2, 1, `"name":"make","cmd_line":"/usr/bin/make test"`},
		{event.CredRevoke, 3001, 6, 2, 4, `"message":"credential failed"`},
		{event.RunEnd, 6002, 4, 2, 1, `"exit_code":2`},
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	i := 0
	for ; sc.Scan(); i++ {
		line := sc.Text()
		if i >= len(wants) {
			t.Fatalf("extra event: %s", line)
		}
		w := wants[i]
		var e ocsfEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Unmapped.Cordon.Type != w.typ || e.ClassUID != w.class || e.ActivityID != w.activity || e.TypeUID != w.class*100+w.activity ||
			e.CategoryUID != w.class/1000 || e.CategoryName == "" || e.StatusID != w.status || e.SeverityID != w.severity || e.Severity == "" {
			t.Errorf("event %d (%s): class %d activity %d type %d status %d severity %d; want %+v", i, e.Unmapped.Cordon.Type, e.ClassUID, e.ActivityID, e.TypeUID, e.StatusID, e.SeverityID, w)
		}
		if !strings.Contains(line, w.check) {
			t.Errorf("event %d (%s) lacks %s:\n%s", i, w.typ, w.check, line)
		}
		if e.Time == 0 || e.Metadata.Version != OCSFVersion || e.Metadata.CorrelationUID != testRun || e.Metadata.Product.Name != "cordon" ||
			e.Actor == nil || e.Actor.User.Name != "alice" || e.Device == nil || e.Device.Hostname != "host" || len(e.Unmapped.Cordon.Body) == 0 {
			t.Errorf("event %d (%s): base attributes missing:\n%s", i, w.typ, line)
		}
	}
	if i != len(wants) {
		t.Errorf("%d events; want %d", i, len(wants))
	}
}

// TestOCSFMappingDocumented: docs/audit.md has one row per event type naming its class.
func TestOCSFMappingDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "audit.md"))
	if err != nil {
		t.Fatal(err)
	}
	all := []event.Type{event.RunStart, event.CmdStart, event.CmdEnd, event.FSDiff, event.NetAllow, event.NetDeny,
		event.CredIssue, event.CredRevoke, event.SyscallAlert, event.GateRequest, event.GateApprove, event.GateDeny,
		event.GateExec, event.RunEnd, event.NetDenySummary, event.NetAllowSummary}
	for _, typ := range all {
		if _, ok := ocsfClasses[typ]; !ok {
			t.Errorf("%s has no OCSF class", typ)
		}
	}
	if len(ocsfClasses) != len(all) {
		t.Errorf("ocsfClasses has %d types; want %d", len(ocsfClasses), len(all))
	}
	for typ, c := range ocsfClasses {
		row := "| `" + string(typ) + "` | " + c.name + " (" + strconv.Itoa(c.uid) + ")"
		if !bytes.Contains(doc, []byte(row)) {
			t.Errorf("docs/audit.md lacks the OCSF row %q", row)
		}
	}
}
