package integration

import (
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeReloadCredentials: a SIGHUP makes the daemon read its config again and take
// its credentials at once: a token removed from the config is refused (401), a token
// added is accepted, with no restart. A config that changes more than credentials (a
// quota here), or does not load, is logged and nothing of it is taken.
func TestServeReloadCredentials(t *testing.T) {
	s := startServe(t)
	acme := s.tcpClient("acme")
	if code, body := acme.call(t, "GET", "/v1/sessions", nil); code != http.StatusOK {
		t.Fatalf("acme before the reload: %d %s", code, body)
	}
	data, err := os.ReadFile(s.file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(data)
	oldSum := ""
	for _, line := range strings.Split(cfg, "\n") {
		if strings.Contains(line, "{name: ci, roles: [agent], token_sha256: ") && oldSum == "" {
			oldSum = line[strings.Index(line, "token_sha256: ")+len("token_sha256: ") : strings.LastIndex(line, "}")]
		}
	}
	if oldSum == "" {
		t.Fatalf("no acme agent token in the config:\n%s", cfg)
	}
	hup := func(text string) {
		t.Helper()
		if err := os.WriteFile(s.file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	// More than credentials: refused whole, the old token still works.
	hup(strings.Replace(strings.Replace(cfg, oldSum, strings.Repeat("c", 64), 1),
		"      - {name: root, roles: [auditor], uid: 0}\n", "      - {name: root, roles: [auditor], uid: 0}\n    quotas: {sessions: 1}\n", 1))
	waitFor(t, 30*time.Second, "the daemon to log the refused reload", func() bool {
		return strings.Contains(s.stderr.String(), "the config was not reloaded") && strings.Contains(s.stderr.String(), "Tenants[0].Quotas")
	})
	if code, body := acme.call(t, "GET", "/v1/sessions", nil); code != http.StatusOK {
		t.Errorf("acme's token after a refused reload: %d %s; want it still accepted", code, body)
	}

	// Only credentials: acme's agent token revoked, a new one added.
	newTok, newSum := newToken(t)
	hup(strings.Replace(cfg, oldSum, newSum, 1))
	waitFor(t, 30*time.Second, "the revoked token to be refused", func() bool {
		code, _ := acme.call(t, "GET", "/v1/sessions", nil)
		return code == http.StatusUnauthorized
	})
	fresh := acme
	fresh.token = newTok
	if code, body := fresh.call(t, "GET", "/v1/sessions", nil); code != http.StatusOK {
		t.Errorf("the added token: %d %s; want 200", code, body)
	}
	if code, body := s.tcpClient("beta").call(t, "GET", "/v1/sessions", nil); code != http.StatusOK {
		t.Errorf("beta's token, unchanged: %d %s; want 200", code, body)
	}
	if !strings.Contains(s.stderr.String(), "credentials reloaded") {
		t.Errorf("the daemon's log does not say it reloaded:\n%s", s.stderr.String())
	}
}
