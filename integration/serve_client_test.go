package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// remoteCLI runs the real cordon binary against one served daemon, with the
// environment it is given (and none of the caller's CORDON_ variables).
type remoteCLI struct {
	t   *testing.T
	env []string
}

func (r remoteCLI) run(args ...string) (stdout, stderr string, code int) {
	r.t.Helper()
	cmd := exec.Command(testutil.Cordon(r.t), args...)
	cmd.Env = r.env
	cmd.Dir = r.t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		r.t.Fatalf("cordon %q: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// with is r with more environment.
func (r remoteCLI) with(env ...string) remoteCLI {
	r.env = append(append([]string{}, r.env...), env...)
	return r
}

// cleanEnv is the environment without the caller's CORDON_ variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORDON_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestServeClient drives a real `cordon serve` with the real `cordon --host`: over TLS
// with the test CA and a token (from $CORDON_TOKEN and from a token file), and over
// the unix socket. What the front door answers is checked now; the sessions (start,
// exec with its streamed output and exit status, ls, stop) once they are served.
func TestServeClient(t *testing.T) {
	s := startServe(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	mustWrite(t, caFile, string(s.ca.pem))
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(s.tokens["acme"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := remoteCLI{t: t, env: cleanEnv()}
	tlsCLI := base.with("CORDON_HOST=https://"+s.addr, "CORDON_TLS_CA="+caFile, "CORDON_TOKEN="+s.tokens["acme"])
	unixCLI := base.with("CORDON_HOST=unix://"+s.sock, "CORDON_TOKEN="+s.tokens["acme"])

	t.Run("refusals", func(t *testing.T) { serveClientRefusals(t, s, base, caFile) })
	t.Run("sessions", func(t *testing.T) {
		for name, cli := range map[string]remoteCLI{
			"tls":        tlsCLI,
			"token file": base.with("CORDON_TLS_CA=" + caFile), // --host and --token-file below
			"unix":       unixCLI,
		} {
			t.Run(name, func(t *testing.T) {
				flags := []string{}
				if name == "token file" {
					flags = []string{"--host", "https://" + s.addr, "--token-file", tokFile}
				}
				serveClientSession(t, cli, flags, name == "token file")
			})
		}
	})
}

// serveClientRefusals: what the front door refuses reaches the user as cordon's
// error, with its exit status; commands that cannot drive a server refuse --host.
func serveClientRefusals(t *testing.T, s *served, base remoteCLI, caFile string) {
	host := "https://" + s.addr
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"bad token", []string{"CORDON_TOKEN=not-a-token", "CORDON_TLS_CA=" + caFile}, []string{"--host", host, "session", "ls"}, 125, "refused the credential"},
		{"no token", []string{"CORDON_TLS_CA=" + caFile}, []string{"--host", host, "session", "ls"}, 125, "refused the credential"},
		{"unknown CA", []string{"CORDON_TOKEN=" + s.tokens["acme"]}, []string{"--host", host, "session", "ls"}, 125, "certificate"},
		{"plain http", []string{"CORDON_TOKEN=" + s.tokens["acme"]}, []string{"--host", "http://" + s.addr, "session", "ls"}, 2, "https://"},
		// uid 0 on the socket is acme's auditor: no agent role.
		{"role", nil, []string{"--host", "unix://" + s.sock, "session", "ls"}, 125, "agent role"},
		{"local command", []string{"CORDON_HOST=" + host}, []string{"run", "--", "true"}, 2, "--host"},
		{"local command flag", nil, []string{"--host", host, "gc"}, 2, "--host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := base.with(tt.env...).run(tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("cordon %q: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
			}
			if strings.Contains(stderr, s.tokens["acme"]) {
				t.Errorf("the token is in the error: %q", stderr)
			}
		})
	}
	// A token file others may read is refused before anything is sent.
	loose := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(loose, []byte(s.tokens["acme"]), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := base.with("CORDON_TLS_CA="+caFile).run("--host", host, "--token-file", loose, "session", "ls")
	if code != 2 || !strings.Contains(stderr, "group or others") {
		t.Errorf("a token file of mode 0644: exit %d, %q", code, stderr)
	}
}

// serveClientSession: start, exec (output streamed, exit status, --json), ls, stop.
func serveClientSession(t *testing.T, cli remoteCLI, flags []string, bwrap bool) {
	run := func(args ...string) (string, string, int) {
		return cli.run(append(append([]string{}, flags...), args...)...)
	}
	start := []string{"session", "start", "--workspace", "client-test"}
	if bwrap {
		start = append(start, "--backend", "bwrap") // the server's choice otherwise
	}
	out, stderr, code := run(start...)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("session start: exit %d, %q %q", code, out, stderr)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			run("session", "stop", id)
		}
	})

	out, stderr, code = run("exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || out != "out\n" || !strings.Contains(stderr, "err\n") {
		t.Errorf("exec: exit %d, stdout %q, stderr %q; want 3, out, err", code, out, stderr)
	}
	out, _, code = run("exec", "--json", id, "--", "sh", "-c", "echo hi; exit 4")
	var res struct {
		Schema   string `json:"schema"`
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Session  string `json:"session"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Schema != "cordon.exec/v1" || res.ExitCode != 4 || res.Stdout != "hi\n" || res.Session != id {
		t.Errorf("exec --json: exit %d, %q (%v)", code, out, err)
	}
	serveClientStreams(t, cli, flags, id)

	out, _, code = run("session", "ls", "--json")
	var ls struct {
		Sessions []struct{ ID, State string } `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || code != 0 || !hasSession(ls.Sessions, id, "running") {
		t.Errorf("session ls --json: exit %d, %q (%v)", code, out, err)
	}
	if _, stderr, code = run("session", "stop", id); code != 0 {
		t.Fatalf("session stop: exit %d, %q", code, stderr)
	}
	stopped = true
	if _, stderr, code = run("exec", id, "--", "true"); code != 125 {
		t.Errorf("exec after stop: exit %d, %q; want 125", code, stderr)
	}
	out, _, _ = run("session", "ls", "--json")
	if err := json.Unmarshal([]byte(out), &ls); err != nil || hasSession(ls.Sessions, id, "running") {
		t.Errorf("session ls after stop: %q (%v)", out, err)
	}
}

func hasSession(list []struct{ ID, State string }, id, state string) bool {
	for _, s := range list {
		if s.ID == id && s.State == state {
			return true
		}
	}
	return false
}

// serveClientStreams: a command's first line reaches cordon exec's stdout while the
// command still runs (it waits 20 s before its second line).
func serveClientStreams(t *testing.T, cli remoteCLI, flags []string, id string) {
	cmd := exec.Command(testutil.Cordon(t), append(append([]string{}, flags...), "exec", id, "--", "sh", "-c", "echo first; sleep 20; echo second")...)
	cmd.Env = cli.env
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	start := time.Now()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(pipe).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "first\n" || time.Since(start) > 15*time.Second {
			t.Errorf("first line %q after %s; want it before the command ends", l, time.Since(start))
		}
	case <-time.After(15 * time.Second):
		t.Error("no output 15 s into a command that printed at once: not streamed")
	}
}
