package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/internal/secret"
)

// echoHost is a credential host that echoes what it was sent back in its response
// head, the way a debugging endpoint or an error page does: the request header named by
// the query's h, in a header value, a header name, the reason phrase or a trailer
// (where), as it came or lower-cased or percent-encoded (how). Over plain HTTP it echoes
// the last Authorization it received over HTTPS (a host that kept it).
type echoHost struct {
	tlsPort, plainPort string
	mu                 sync.Mutex
	got                []string // Authorization headers received over HTTPS
}

func newEchoHost(t *testing.T, ip string, cert tls.Certificate) *echoHost {
	t.Helper()
	e := &echoHost{}
	echo := func(w http.ResponseWriter, r *http.Request, v string) {
		q := r.URL.Query()
		if _, cred, ok := strings.Cut(v, " "); ok && q.Get("bare") != "" {
			v = cred
		}
		switch q.Get("how") {
		case "lower":
			v = strings.ToLower(v)
		case "percent":
			v = url.QueryEscape(v)
		}
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		reason, hdr := "OK", ""
		switch q.Get("where") {
		case "reason":
			reason = "OK " + v
		case "value":
			hdr = "X-Echo: " + v + "\r\n"
		case "name":
			hdr = "X-" + v + ": 1\r\n"
		case "trailer":
			fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nConnection: close\r\nTrailer: X-Echo\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\nX-Echo: %s\r\n\r\n", v)
			bw.Flush()
			return
		}
		fmt.Fprintf(bw, "HTTP/1.1 200 %s\r\n%sConnection: close\r\nContent-Length: 3\r\n\r\nok\n", reason, hdr)
		bw.Flush()
	}
	start := func(h http.HandlerFunc, tlsCert *tls.Certificate) string {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}}
		if tlsCert != nil {
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{*tlsCert}}
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		return port
	}
	e.tlsPort = start(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.got = append(e.got, r.Header.Get("Authorization"))
		e.mu.Unlock()
		echo(w, r, r.Header.Get(r.URL.Query().Get("h")))
	}, &cert)
	e.plainPort = start(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		last := ""
		if len(e.got) > 0 {
			last = e.got[len(e.got)-1]
		}
		e.mu.Unlock()
		echo(w, r, last)
	}, nil)
	return e
}

func (e *echoHost) received() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// TestRedProxyCredentialEchoed is the attack of issue 34 §2: the sandbox asks a
// credential host that echoes its request to send back, in every place of a response
// head and re-encoded, each form the proxy makes of a credential (the value in a
// header, Bearer, Basic base64 of user:value at every base64 offset of the value). No
// form of the value reaches the sandbox (its output, its files) or the audit log; exact
// echoes come back as what the sandbox sent.
func TestRedProxyCredentialEchoed(t *testing.T) {
	w := newWorld(t)
	cert, caFile := testPKI(t, "127.0.0.2")
	w.env = append(w.env, "SSL_CERT_FILE="+caFile)
	host := newEchoHost(t, "127.0.0.2", cert)
	w.contract(fmt.Sprintf(`version: 1
network:
  allow:
    - {cidr: 127.0.0.0/8, ports: [%s, %s], why: test servers}
credentials:
  - {name: API_TOKEN, provider: local, deliver: proxy, hosts: [127.0.0.2], scope: {scopes: [read]}, why: call the API}
`, host.tlsPort, host.plainPort))
	// Each line: curl options that carry the placeholder, then the header to echo.
	forms := []string{
		`-H "X-Api-Key: $API_TOKEN"|X-Api-Key`,
		`|Authorization`, // no Authorization: the proxy sends Bearer VALUE
		`-u ":$API_TOKEN"|Authorization`,
		`-u "a:$API_TOKEN"|Authorization`,
		`-u "ab:$API_TOKEN"|Authorization`,
		`-u "$API_TOKEN:x"|Authorization`,
	}
	script := `set -u
i=0
echo "$API_TOKEN" > placeholder.txt
while IFS='|' read -r opts h; do
  for where in value name reason trailer; do
    for how in plain lower percent; do
      for bare in "" $([ $where = name ] && echo 1); do
        i=$((i+1))
        eval "curl -sv --raw --max-time 10 $opts -D head.$i -o body.$i 'https://127.0.0.2:` + host.tlsPort + `/echo?h=$h&where=$where&how=$how&bare=$bare'" 2>>curl.log
        echo "$i $? $(grep '^HTTP/' head.$i | tail -1)" >> statuses.txt
      done
    done
  done
done <<'FORMS'
` + strings.Join(forms, "\n") + `
FORMS
for where in value name reason trailer; do
  curl -sv --raw --max-time 10 -D plainhead.$where "http://127.0.0.2:` + host.plainPort + `/echo?where=$where&how=lower" 2>>curl.log
  echo
done
echo done`
	r := w.sh(script)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("%v", r)
	}
	got := host.received()
	var real string
	for _, a := range got {
		if v, ok := strings.CutPrefix(a, "Bearer "); ok {
			real = v
		}
	}
	if real == "" || len(got) != 5*3*len(forms) {
		t.Fatalf("the echo host got %d requests, none with the real Bearer token: %q", len(got), got)
	}
	m := secret.NewMatcher(secret.Named{Name: "API_TOKEN", Value: real})
	seen := r.stdout + r.stderr
	entries, _ := os.ReadDir(w.ws)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(w.ws, e.Name()))
		seen += "\n" + e.Name() + ":\n" + string(data)
	}
	if _, ok := m.Find(seen); ok {
		t.Errorf("the sandbox saw a form of the real token:\n%s", m.Replace(seen, func(string) string { return "<<<LEAK>>>" }))
	}
	// Not vacuous: exact echoes came back as the placeholder, the rest were refused.
	ph, _ := os.ReadFile(filepath.Join(w.ws, "placeholder.txt"))
	statuses, _ := os.ReadFile(filepath.Join(w.ws, "statuses.txt"))
	if !strings.Contains(seen, "X-Echo: "+strings.TrimSpace(string(ph))) {
		t.Errorf("no exact echo came back as the placeholder:\n%s", statuses)
	}
	if !strings.Contains(string(statuses), " 502 ") || !strings.Contains(string(statuses), " 200 ") {
		t.Errorf("want both relayed and refused responses:\n%s", statuses)
	}
	for _, rec := range lastRun(t, w) {
		if _, ok := m.Find(string(rec.Body)); ok {
			t.Errorf("a form of the real token is in the audit log (%s): %s", rec.Type,
				m.Replace(string(rec.Body), func(string) string { return "<<<LEAK>>>" }))
		}
	}
	if v := w.verifyToken(real); v.code != 1 {
		t.Errorf("token still valid after the run: %v", v)
	}
}

// TestContainerProxyCredentialEchoed: TestRedProxyCredentialEchoed on docker and
// containerd, whose sandboxes reach the same proxy through their own listener.
func TestContainerProxyCredentialEchoed(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) { TestRedProxyCredentialEchoed(t) })
}
