package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/secret"
)

func TestRedactorAdd(t *testing.T) {
	tests := []struct {
		name, secret, value string
		ok                  bool
	}{
		{"ok", "GITHUB_TOKEN", "ghp_abcdefgh", true},
		{"min length", "PIN", "1234", true},
		{"too short", "PIN", "123", false},
		{"empty", "X", "", false},
		{"not utf-8", "X", "ab\xffcd", false},
		{"bad name", "a b", "longenough", false},
		{"name with bracket", "X]", "longenough", false},
		{"empty name", "", "longenough", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := NewRedactor().Add(tt.secret, tt.value)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrBadSecret)) {
				t.Errorf("Add(%q, %q) = %v; want ok=%v", tt.secret, tt.value, err, tt.ok)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	r := NewRedactor()
	for name, v := range map[string]string{"A": "secretvalue", "B": "secret", "Q": `q"u\o<te>`} {
		if err := r.Add(name, v); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ in, want string }{
		{"x secretvalue y", "x [REDACTED:A] y"}, // the longer secret wins
		{"secret secretvalue", "[REDACTED:B] [REDACTED:A]"},
		{`say q"u\o<te>!`, "say [REDACTED:Q]!"},
		{"nothing here", "nothing here"},
	}
	for _, tt := range tests {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	if got := r.trimPartial("output ends with secretva"); got != "output ends with " {
		t.Errorf("trimPartial = %q", got)
	}
	if got := r.trimPartial("clean end"); got != "clean end" {
		t.Errorf("trimPartial = %q", got)
	}
}

func TestRedactJSONKeepsOrder(t *testing.T) {
	r := NewRedactor()
	if err := r.Add("T", "tok\nen<1>"); err != nil {
		t.Fatal(err)
	}
	in := `{"z":"a tok\nen<1> b","a":[1,2.50,true,null,{"tok\nen<1>":"k"}],"m":"\u0074ok\u000aen\u003c1>"}`
	want := `{"z":"a [REDACTED:T] b","a":[1,2.50,true,null,{"[REDACTED:T]":"k"}],"m":"[REDACTED:T]"}`
	got, err := r.redactJSON([]byte(in))
	if err != nil || string(got) != want {
		t.Errorf("redactJSON:\n got %s, %v\nwant %s", got, err, want)
	}
}

// TestWriterRedacts checks that a secret never reaches the log or a patch file, wherever
// it appears: a body (raw or needing JSON escapes), the cmd field, a patch inline or in
// a file, an output head cut in the middle of the secret.
func TestWriterRedacts(t *testing.T) {
	const tok = `ghp_S3cr3t"\value`
	red := NewRedactor()
	if err := red.Add("EARLY", "early-secret"); err != nil {
		t.Fatal(err)
	}
	w, _ := newWriter(t, Options{Redactor: red, MaxInlinePatch: 120})
	if err := w.Redactor().Add("GITHUB_TOKEN", tok); err != nil {
		t.Fatal(err)
	}
	w.Emit(event.Event{Type: event.NetDeny, Cmd: "x" + tok, Body: netBody{Dest: "h:443", Reason: "token=" + tok + " early-secret"}})
	w.Emit(event.Event{Type: event.CredIssue, Body: map[string]string{tok: "as a key"}})
	patch := "diff --git a/.env b/.env\n--- a/.env\n+++ b/.env\n@@ -0,0 +1,2 @@\n+TOKEN=" + tok + "\n" +
		strings.Repeat("+filler line\n", 10)
	if err := w.RecordDiff("2", &fsdiff.Result{Patch: []byte(patch)}, nil); err != nil {
		t.Fatal(err)
	}
	c := NewCapture(40)
	fmt.Fprintf(c, "%s%s and more", strings.Repeat(".", 30), tok) // the head ends mid-secret
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: "2", Body: CmdEnd{Stdout: c.Output()}})
	if err := w.Close(RunEnd{Detail: "died with " + tok}); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(w.Path())
	file, err := os.ReadFile(w.Dir() + "/fsdiff-0001.patch")
	if err != nil {
		t.Fatal(err)
	}
	for what, data := range map[string][]byte{"log": log, "patch file": file} {
		for _, leak := range []string{"S3cr3t", `S3cr3t\"`, "early-secret", "ghp_"} {
			if bytes.Contains(data, []byte(leak)) {
				t.Errorf("%s leaks %q:\n%s", what, leak, data)
			}
		}
	}
	if n := bytes.Count(log, []byte("[REDACTED:GITHUB_TOKEN]")); n != 5 {
		t.Errorf("log has %d redactions of the token; want 5:\n%s", n, log)
	}
	if !bytes.Contains(file, []byte("+TOKEN=[REDACTED:GITHUB_TOKEN]\n")) {
		t.Errorf("patch file:\n%s", file)
	}
	if _, err := Verify(w.Path()); err != nil {
		t.Errorf("redacted log does not verify: %v", err)
	}
}

func TestRedactorConcurrentAdd(t *testing.T) {
	w, _ := newWriter(t, Options{Sync: SyncClose})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				v := fmt.Sprintf("secret-%d-%d", i, j)
				if err := w.Redactor().Add(fmt.Sprintf("S%d_%d", i, j), v); err != nil {
					t.Error(err)
				}
				w.Emit(event.Event{Type: event.CredIssue, Body: netBody{Dest: v}})
			}
		})
	}
	wg.Wait()
	if err := w.Close(RunEnd{}); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(w.Path())
	if bytes.Contains(log, []byte("secret-")) {
		t.Error("a secret added before its event was emitted leaked")
	}
}

func TestCapture(t *testing.T) {
	c := NewCapture(5)
	fmt.Fprint(c, "abcd")
	fmt.Fprint(c, "é and more") // é is two bytes: the head would end in half of it
	got := c.Output()
	want := Output{Bytes: 15, SHA256: "e3b0c442", Head: "abcd", Truncated: true}
	if got.Bytes != want.Bytes || got.Head != want.Head || !got.Truncated || len(got.SHA256) != 64 {
		t.Errorf("Output() = %+v; want %+v", got, want)
	}
	if out := NewCapture(0).Output(); out.Truncated || out.Bytes != 0 ||
		out.SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("empty capture: %+v", out)
	}
}

// TestWriterRedactsDerivedForms: the forms the egress proxy makes of a value (Basic
// base64 at every offset, in any case, percent-encoded), quoted in an event's error as a
// destination echoed them, never reach the log.
func TestWriterRedactsDerivedForms(t *testing.T) {
	const tok = "cordon_Ab3+/x9Zq-7TUVwxLONG"
	w, _ := newWriter(t, Options{})
	if err := w.Redactor().Add("API_TOKEN", tok); err != nil {
		t.Fatal(err)
	}
	var quoted []string
	for _, user := range []string{"", "a", "ab", "abc"} {
		b64 := base64.StdEncoding.EncodeToString([]byte(user + ":" + tok))
		quoted = append(quoted, "Basic "+b64, strings.ToLower(b64), url.QueryEscape(b64))
	}
	quoted = append(quoted, strings.ToUpper(tok), url.PathEscape(url.QueryEscape(tok)), hex.EncodeToString([]byte(tok)))
	for _, q := range quoted {
		w.Emit(event.Event{Type: event.NetAllow, Body: netBody{Dest: "h:443", Reason: `malformed HTTP status code "` + q + `"`}})
	}
	if err := w.Close(RunEnd{}); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(w.Path())
	m := secret.NewMatcher(secret.Named{Name: "API_TOKEN", Value: tok})
	for line := range bytes.Lines(log) {
		if _, ok := m.Find(string(line)); ok {
			t.Errorf("a form of the token is in the log:\n%s", line)
		}
	}
	if n := bytes.Count(log, []byte("[REDACTED:API_TOKEN]")); n < len(quoted) {
		t.Errorf("log has %d redactions; want at least %d:\n%s", n, len(quoted), log)
	}
	if _, err := Verify(w.Path()); err != nil {
		t.Errorf("redacted log does not verify: %v", err)
	}
}
