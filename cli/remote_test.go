package cli

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// TestHostRefusesLocalCommands: with a server named (--host or $CORDON_HOST), every
// command that acts on this host refuses, naming --host, instead of running here;
// those that drive a server, and those that act on neither, do not refuse.
func TestHostRefusesLocalCommands(t *testing.T) {
	t.Setenv("CORDON_HOST", "")
	refused := [][]string{
		{"run", "--", "true"}, {"gc"}, {"gate", "request", "push"},
		{"backends"}, {"doctor"}, {"serve", "--config", "/nonexistent"},
	}
	for _, args := range refused {
		_, stderr, code := run(t, append([]string{"--host", "unix:///nonexistent.sock"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--host") || !strings.Contains(stderr, "works on this host only") {
			t.Errorf("cordon --host %q: exit %d, %q; want 2 naming --host", args, code, stderr)
		}
	}
	t.Setenv("CORDON_HOST", "unix:///nonexistent.sock")
	if _, stderr, code := run(t, "gc"); code != 2 || !strings.Contains(stderr, "$CORDON_HOST") {
		t.Errorf("CORDON_HOST gc: exit %d, %q", code, stderr)
	}
	// Those that drive a server get as far as dialling it (125: nothing answers).
	for _, args := range [][]string{{"session", "ls"}, {"session", "stop", "x"}, {"session", "sweep", "x"}, {"exec", "x", "--", "true"}, {"session", "start", "--workspace", "w"},
		{"gate", "ls"}, {"gate", "approve", "x"}, {"audit", "ls"}, {"audit", "verify", "last"}, {"audit", "export", "--format", "jsonl", "x"},
		{"audit", "report", "-o", "-", "last"}, {"apply", "x"}, {"discard", "x"}} {
		if _, stderr, code := run(t, args...); code != 125 || !strings.Contains(stderr, "nonexistent.sock") {
			t.Errorf("CORDON_HOST %q: exit %d, %q; want 125 from dialling the server", args, code, stderr)
		}
	}
	// Flags naming this host's directories, or what a server does not do, are refused.
	for _, args := range [][]string{{"audit", "ls", "--audit-dir", "/x"}, {"gate", "ls", "--run-root", "/x"}, {"apply", "--all", "last"},
		{"audit", "export", "--force", "--format", "jsonl", "x"}} {
		if _, stderr, code := run(t, args...); code != 2 || !strings.Contains(stderr, "not with --host") {
			t.Errorf("CORDON_HOST %q: exit %d, %q; want 2, not with --host", args, code, stderr)
		}
	}
	if _, _, code := run(t, "version"); code != 0 {
		t.Errorf("CORDON_HOST version: exit %d", code)
	}
}

// TestHostCompanionsNeedHost: the token, CA and certificate flags without a host are
// usage errors, not silently ignored; --workspace likewise.
func TestHostCompanionsNeedHost(t *testing.T) {
	t.Setenv("CORDON_HOST", "")
	for _, args := range [][]string{
		{"--token-file", "/x", "session", "ls"}, {"session", "ls", "--tls-ca", "/x"}, {"exec", "--tls-cert", "/x", "id", "--", "true"},
		{"session", "start", "--workspace", "w"},
	} {
		if _, stderr, code := run(t, args...); code != 2 || !strings.Contains(stderr, "--host") {
			t.Errorf("%q: exit %d, %q; want 2 naming --host", args, code, stderr)
		}
	}
}

// TestHostRefusedSchemes: a token is never sent over plain HTTP.
func TestHostRefusedSchemes(t *testing.T) {
	t.Setenv("CORDON_TOKEN", "secret-token")
	_, stderr, code := run(t, "--host", "http://127.0.0.1:9", "session", "ls")
	if code != 2 || !strings.Contains(stderr, "https://") || strings.Contains(stderr, "secret-token") {
		t.Errorf("http:// host: exit %d, %q", code, stderr)
	}
}

// fakeAPI is a TLS server answering the sessions routes as cordon serve does, and
// recording the bodies it was sent.
func fakeAPI(t *testing.T, token string) (url, caFile string, bodies *[]string) {
	t.Helper()
	var got []string
	frames := []wire.Frame{{FD: 1, Data: []byte("out\n")}, {FD: 2, Data: []byte("err\n")},
		{Result: &wire.Result{V: 1, Session: "s1", ExitCode: 3, Denied: []wire.Denial{{Destination: "evil.example:443", Reason: "not allowed"}}}}}
	sess := api.Session{ID: "s1", State: "running", Started: time.Unix(0, 0), Backend: "bwrap", Workspace: "ws"}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", api.JSON)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) { reply(w, sess) })
	mux.HandleFunc("GET /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.SessionList{Sessions: []api.Session{sess, {ID: "s2\x1b[31m", State: "stopped"}}})
	})
	mux.HandleFunc("POST /v1/sessions/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "s1" {
			w.Header().Set("Content-Type", api.JSON)
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "no such session"})
			return
		}
		reply(w, sess)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.NDJSON)
		for _, f := range frames {
			_ = json.NewEncoder(w).Encode(f)
		}
	})
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		data, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(data))
		r.Body = io.NopCloser(bytes.NewReader(data))
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return ts.URL, caFile, &got
}

// TestHostCommands: with --host, session start, ls, stop and exec print what they
// print locally and exit as they do locally, from the server's answers.
func TestHostCommands(t *testing.T) {
	url, ca, bodies := fakeAPI(t, "tok")
	t.Setenv("CORDON_TOKEN", "tok")
	t.Setenv("CORDON_HOST", url)
	t.Setenv("CORDON_TLS_CA", ca)
	contract := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(contract, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := run(t, "session", "start", "-c", contract, "--workspace", "ws", "--stage"); code != 0 || out != "s1\n" {
		t.Errorf("session start: %d %q %q", code, out, stderr)
	}
	if want := `POST /v1/sessions {"contract":"version: 1\n","workspace":"ws","stage":true}`; len(*bodies) == 0 || (*bodies)[0] != want {
		t.Errorf("start sent %q; want %q", *bodies, want)
	}
	out, _, code := run(t, "session", "ls")
	if code != 0 || !strings.HasPrefix(out, "s1\trunning\t") || strings.Contains(out, "\x1b") {
		t.Errorf("session ls: %d %q", code, out)
	}
	out, stderr, code := run(t, "exec", "s1", "--", "make")
	if code != 3 || out != "out\n" || !strings.HasPrefix(stderr, "err\n") || !strings.Contains(stderr, "evil.example:443") {
		t.Errorf("exec: %d %q %q; want 3, the output and the denial summary", code, out, stderr)
	}
	out, _, code = run(t, "exec", "--json", "s1", "--", "make")
	var res struct {
		Schema   string `json:"schema"`
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Schema != "cordon.exec/v1" || res.ExitCode != 3 || res.Stdout != "out\n" {
		t.Errorf("exec --json: %d %q", code, out)
	}
	if _, stderr, code := run(t, "session", "stop", "s1"); code != 0 {
		t.Errorf("session stop: %d %q", code, stderr)
	}
	if _, stderr, code := run(t, "session", "stop", "gone"); code != 125 || !strings.Contains(stderr, "no such session gone") {
		t.Errorf("session stop of an unknown id: %d %q", code, stderr)
	}
	t.Setenv("CORDON_TOKEN", "wrong")
	if _, stderr, code := run(t, "exec", "s1", "--", "make"); code != 125 || !strings.Contains(stderr, "refused the credential") {
		t.Errorf("exec with a bad token: %d %q", code, stderr)
	}
}
