package egress

import (
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/secret"
)

// echoServer is an HTTPS credential host that echoes the request header named by the
// query's h into its response: in a header value, a header name, the reason phrase or a
// trailer (where), as it came or re-encoded (how).
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		v := r.Header.Get(q.Get("h"))
		if _, cred, ok := strings.Cut(v, " "); ok && q.Get("bare") != "" {
			v = cred // the credential without its scheme
		}
		switch q.Get("how") {
		case "lower":
			v = strings.ToLower(v)
		case "upper":
			v = strings.ToUpper(v)
		case "percent":
			v = url.QueryEscape(v)
		case "url-base64":
			if b, err := base64.StdEncoding.DecodeString(v); err == nil {
				v = base64.RawURLEncoding.EncodeToString(b)
			}
		}
		conn, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		reason, hdr := "OK", ""
		switch q.Get("how") {
		case "split": // two headers, the last 16 bytes in the second
			k := max(len(v)-16, 0)
			hdr = "X-Echo-A: " + v[:k] + "\r\nX-Echo-B: " + v[k:] + "\r\n"
		case "truncate": // the first 24 bytes
			hdr = "X-Echo: " + v[:min(len(v), 24)] + "\r\n"
		}
		switch q.Get("where") {
		case "reason":
			reason = "OK " + v
		case "value":
			if hdr == "" {
				hdr = "X-Echo: " + v + "\r\n"
			}
		case "name":
			hdr = "X-" + v + ": 1\r\n"
		case "trailer":
			fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nConnection: close\r\nTrailer: X-Echo\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\nX-Echo: %s\r\n\r\n", v)
			bw.Flush()
			return
		}
		fmt.Fprintf(bw, "HTTP/1.1 200 %s\r\n%sConnection: close\r\nContent-Length: 3\r\n\r\nok\n", reason, hdr)
		bw.Flush()
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// headText is what a client sees of a response outside its body: the status line, the
// headers (names and values) and the trailers.
func headText(resp *http.Response) string {
	var b strings.Builder
	b.WriteString(resp.Status + "\n")
	resp.Header.Write(&b)
	resp.Trailer.Write(&b)
	return b.String()
}

// TestScrubEveryForm: a credential host that echoes the injected header back, in each
// place a response head has and in the re-encodings an echo might apply, never hands
// the client any form of the value: the proxy puts back what the client sent, or
// refuses the response. Every form the proxy can produce (every secret.Encoding) has
// cases here.
func TestScrubEveryForm(t *testing.T) {
	srv := echoServer(t)
	e, ca := withPolicy(t, srv, nil)
	c := clientFor(t, e, ca.Certificate())
	base := fmt.Sprintf("https://example.com:%d/echo", portOf(t, srv.URL))
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	type form struct {
		enc  secret.Encoding
		name string
		hdr  map[string]string
		echo string // the header echoed
	}
	forms := []form{
		{secret.Raw, "header value", map[string]string{"X-Api-Key": testPlaceholder}, "X-Api-Key"},
		{secret.Raw, "inside a header value", map[string]string{"Cookie": "s=" + testPlaceholder + "; t=1"}, "Cookie"},
		{secret.Raw, "default bearer", nil, "Authorization"},
		{secret.Raw, "token scheme", map[string]string{"Authorization": "token " + testPlaceholder}, "Authorization"},
	}
	for _, user := range []string{"", "a", "ab", "abc"} { // every base64 offset of the value
		forms = append(forms, form{secret.Base64, "basic user " + user,
			map[string]string{"Authorization": basic(user + ":" + testPlaceholder)}, "Authorization"})
	}
	forms = append(forms, form{secret.Base64, "basic value as user", map[string]string{"Authorization": basic(testPlaceholder + ":x")}, "Authorization"})
	covered := map[secret.Encoding]bool{}
	for _, f := range forms {
		covered[f.enc] = true
	}
	for _, enc := range secret.Encodings {
		if !covered[enc] {
			t.Errorf("encoding %v has no case: add the forms the proxy makes with it", enc)
		}
	}
	m := secret.NewMatcher(secret.Named{Name: "API_TOKEN", Value: testReal})
	for _, f := range forms {
		for _, where := range []string{"value", "name", "reason", "trailer"} {
			hows := []string{"", "lower", "upper", "percent", "url-base64"}
			if where == "value" {
				hows = append(hows, "split", "truncate")
			}
			for _, how := range hows {
				for _, bare := range []string{"", "1"} {
					q := url.Values{"h": {f.echo}, "where": {where}, "how": {how}, "bare": {bare}}
					name := fmt.Sprintf("%s/%s/%s/bare=%s", f.name, where, how, bare)
					t.Run(name, func(t *testing.T) {
						req, _ := http.NewRequest("GET", base+"?"+q.Encode(), nil)
						for k, v := range f.hdr {
							req.Header.Set(k, v)
						}
						resp, err := c.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						seen := headText(resp) + string(body)
						if n, ok := m.FindPiece(seen); ok {
							t.Fatalf("the client saw a form of %s:\n%s", n, seen)
						}
						if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadGateway {
							t.Errorf("status %d", resp.StatusCode)
						}
					})
				}
			}
		}
	}
}

// TestScrubPutsBackWhatTheClientSent: an exact echo is not refused but shows the client
// its own request: the placeholder, or its own Basic credentials.
func TestScrubPutsBackWhatTheClientSent(t *testing.T) {
	srv := echoServer(t)
	e, ca := withPolicy(t, srv, nil)
	c := clientFor(t, e, ca.Certificate())
	base := fmt.Sprintf("https://example.com:%d/echo?where=value&h=", portOf(t, srv.URL))
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ab:"+testPlaceholder))
	for _, tc := range []struct{ h, v, want string }{
		{"X-Api-Key", testPlaceholder, testPlaceholder},
		{"Authorization", "Bearer " + testPlaceholder, "Bearer " + testPlaceholder},
		{"Authorization", basic, basic},
	} {
		body, resp := getHeaders(t, c, base+tc.h, map[string]string{tc.h: tc.v})
		if resp.StatusCode != 200 || resp.Header.Get("X-Echo") != tc.want {
			t.Errorf("%s: %v, X-Echo %q; want 200 and %q (%s)", tc.h, resp.Status, resp.Header.Get("X-Echo"), tc.want, body)
		}
	}
}

// TestScrubRefusalIsLogged: a refused response is reported with the credential's name,
// never a form of its value.
func TestScrubRefusalIsLogged(t *testing.T) {
	srv := echoServer(t)
	e, ca := withPolicy(t, srv, nil)
	c := clientFor(t, e, ca.Certificate())
	u := fmt.Sprintf("https://example.com:%d/echo?where=reason&how=lower&h=X-Api-Key", portOf(t, srv.URL))
	body, resp := getHeaders(t, c, u, map[string]string{"X-Api-Key": testPlaceholder})
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %s, want 502: %s", resp.Status, body)
	}
	c.CloseIdleConnections()
	typ, ev := e.events.nth(t, 1)
	if typ != event.NetAllow || !strings.Contains(ev.Error, "credential API_TOKEN in the status line") {
		t.Errorf("event %s %+v, want the refusal named", typ, ev)
	}

	// A head net/http cannot parse is quoted in the error: the event has the form
	// redacted (the audit log's redactor does it again).
	c = clientFor(t, e, ca.Certificate())
	u = fmt.Sprintf("https://example.com:%d/echo?where=name&h=Authorization", portOf(t, srv.URL))
	getHeaders(t, c, u, map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("ab:"+testPlaceholder))})
	c.CloseIdleConnections()
	_, ev = e.events.nth(t, 2)
	m := secret.NewMatcher(secret.Named{Name: "API_TOKEN", Value: testReal})
	if _, ok := m.Find(fmt.Sprintf("%+v", ev)); ok || !strings.Contains(ev.Error, "[REDACTED:API_TOKEN]") {
		t.Errorf("event %+v: want the quoted form redacted", ev)
	}
}

// TestScrubPlainHTTP: a plain-HTTP response that carries a credential's value (a host
// that kept it from an earlier request) is refused too.
func TestScrubPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Kept", strings.ToUpper(testReal))
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(srv.Close)
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, []policy.Rule{cidrRule(portOf(t, srv.URL))}, fakeResolver{}, Config{
		Intercept: &Intercept{CA: ca, Credentials: []Credential{
			{Name: "API_TOKEN", Hosts: []string{"example.com"}, Placeholder: testPlaceholder, Value: secret.New(testReal)},
		}},
	})
	host := strings.TrimPrefix(srv.URL, "http://")
	resp, _, _ := rawExchange(t, e, fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", host, host))
	b, _ := io.ReadAll(resp.Body)
	seen := headText(resp) + string(b)
	if _, ok := secret.NewMatcher(secret.Named{Name: "T", Value: testReal}).Find(seen); ok || resp.StatusCode != http.StatusBadGateway {
		t.Errorf("want 502 and no value, got:\n%s", seen)
	}
}

// TestInjectedFormsAreMatched: whatever inject writes that differs from what the client
// sent is found by the matcher the proxy scrubs with, so injection and scrubbing cannot
// drift apart: a new way of writing a value that the matcher does not cover fails here.
func TestInjectedFormsAreMatched(t *testing.T) {
	ic := &Intercept{Credentials: []Credential{{Name: "API_TOKEN", Placeholder: testPlaceholder, Value: secret.New(testReal)}}}
	m, _ := ic.forms()
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, sent := range []http.Header{
		{},
		{"X-Api-Key": {testPlaceholder}},
		{"Cookie": {"a=1; t=" + testPlaceholder}},
		{"Authorization": {"token " + testPlaceholder}},
		{"Authorization": {basic(testPlaceholder)}},
		{"Authorization": {basic("a:" + testPlaceholder)}},
		{"Authorization": {basic("ab:" + testPlaceholder + ":" + testPlaceholder)}},
		{"Authorization": {basic("abc:" + testPlaceholder)}},
	} {
		h := sent.Clone()
		back := inject(h, ic.Credentials)
		for k, vs := range h {
			for i, v := range vs {
				if i < len(sent[k]) && sent[k][i] == v {
					continue
				}
				if _, ok := m.Find(v); !ok {
					t.Errorf("inject wrote %s: %q, which the matcher does not find", k, v)
				}
			}
		}
		for i := 0; i+1 < len(back); i += 2 {
			if _, ok := m.Find(back[i+1]); ok {
				t.Errorf("what inject puts back (%q) holds the value", back[i+1])
			}
		}
	}
}
