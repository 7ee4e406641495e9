package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
)

// rtfixLog writes a sealed run id of about mib MiB below the audit root root.
func rtfixLog(t *testing.T, root, id string, mib int) {
	t.Helper()
	w, err := audit.Create(root, id, audit.Options{Start: audit.RunStart{Backend: "bwrap", Workspace: "/w"}})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("A", 256<<10)
	for range mib * 4 {
		cmd, err := w.StartCmd(audit.CmdStart{Argv: []string{"true", big}, Cwd: "/w"})
		if err != nil {
			t.Fatal(err)
		}
		w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: audit.CmdEnd{ExitCode: 0}})
	}
	if err := w.Close(audit.RunEnd{Reason: audit.ReasonExited}); err != nil {
		t.Fatal(err)
	}
}

// TestRTFixUnreadShowsOfTwoTenantsDenyAThird: through the real binary, acme and beta
// each ask two shows of a 24 MiB log of their own and do not read the answers (the
// daemon holds each until its write times out, 60s); gamma's show of its own small
// run must still be answered. The bounds (2 shows a tenant, 4 in all,
// server/held.go) make it 429 server_log_documents: any two tenants deny every
// other tenant's shows for as long as they repeat this.
func TestRTFixUnreadShowsOfTwoTenantsDenyAThird(t *testing.T) {
	gammaTok, gammaSum := newToken(t)
	gammaRoot := filepath.Join(shortTempDir(t), "gamma")
	s := startServeWith(t, "  - name: gamma\n    root: "+gammaRoot+"\n    credentials:\n      - {name: audit, roles: [auditor], token_sha256: "+gammaSum+"}\n")
	s.tokens["gamma"] = gammaTok
	const id, small = "20261206T120000Z-a0a0a0", "20261206T120001Z-b1b1b1"
	for _, tenant := range []string{"acme", "beta"} {
		rtfixLog(t, filepath.Join(s.tenantRoot(tenant), "audit"), id, 24)
	}
	rtfixLog(t, filepath.Join(gammaRoot, "audit"), small, 0)

	pool := x509.NewCertPool()
	pool.AddCert(s.ca.cert)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	codes := make(chan int, 4)
	for _, tenant := range []string{"acme", "beta"} {
		cert, _, _ := s.ca.issue(t, "lead."+tenant, false)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}, ReadBufferSize: 4 << 10}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		for range 2 {
			go func() {
				req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+s.addr+"/v1/runs/"+id, nil)
				resp, err := c.Do(req)
				if err != nil {
					codes <- -1
					return
				}
				codes <- resp.StatusCode
				<-ctx.Done() // never read
				resp.Body.Close()
			}()
		}
	}
	deadline := time.After(time.Minute)
	for range 4 {
		select {
		case c := <-codes:
			if c != http.StatusOK {
				t.Fatalf("an attacker's show: %d; want 200", c)
			}
		case <-deadline:
			t.Fatal("the attackers' shows did not answer in a minute")
		}
	}
	code, body := s.tcpClient("gamma").call(t, "GET", "/v1/runs/"+small, nil)
	if code != http.StatusOK {
		t.Errorf("break: gamma's show of its own run while acme and beta each hold two unread shows: %d %s; want 200", code, strings.TrimSpace(body))
	}
}
