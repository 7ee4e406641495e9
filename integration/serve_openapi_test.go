package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeOpenAPIAndMetrics drives a real `cordon serve` over TLS: the OpenAPI
// document needs a credential and is the document; request bodies with a key
// repeated or in another case are refused (encoding/json alone takes the last, or
// folds the case); /metrics is not on the API's listener, and on its own loopback
// listener it counts the requests above by route pattern, with no id in any label.
func TestServeOpenAPIAndMetrics(t *testing.T) {
	s := startServe(t)
	c := s.client()
	base := "https://" + s.addr
	tok := s.tokens["acme"]

	if code, body, _ := do(t, c, "GET", base+"/v1/openapi.json", "", nil); code != http.StatusUnauthorized || body != unauthorized {
		t.Errorf("GET /v1/openapi.json without a credential: %d %s; want 401", code, body)
	}
	code, body, h := do(t, c, "GET", base+"/v1/openapi.json", tok, nil)
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &doc) != nil {
		t.Fatalf("GET /v1/openapi.json: %d %s %.200s", code, h.Get("Content-Type"), body)
	}
	if doc.OpenAPI != "3.1.0" || doc.Paths["/v1/sessions/{id}/exec"]["post"] == nil {
		t.Errorf("the document: openapi %q, exec %v", doc.OpenAPI, doc.Paths["/v1/sessions/{id}/exec"])
	}

	for _, b := range []string{`{"workspace":"a","workspace":"../../etc"}`, `{"WORKSPACE":"a"}`, `{"workſpace":"a"}`} {
		code, body, _ := do(t, c, "POST", base+"/v1/sessions", tok, strings.NewReader(b), "Content-Type", "application/json")
		if code != http.StatusBadRequest {
			t.Errorf("POST /v1/sessions %s: %d %s; want 400", b, code, body)
		}
	}
	do(t, c, "GET", base+"/v1/sessions/id-in-no-label", tok, nil)
	if code, body, _ := do(t, c, "GET", base+"/metrics", tok, nil); code != http.StatusNotFound {
		t.Errorf("GET /metrics on the API's listener: %d %s; want 404", code, body)
	}

	var addr string
	select {
	case addr = <-s.metrics:
	case <-time.After(30 * time.Second):
		t.Fatalf("no metrics listener after 30s:\n%s", s.stderr)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	scraped, _ := io.ReadAll(resp.Body)
	text := string(scraped)
	for _, want := range []string{
		`cordon_http_requests_total{code="401",method="GET",route="GET /v1/openapi.json"} 1`,
		`cordon_http_requests_total{code="200",method="GET",route="GET /v1/openapi.json"} 1`,
		`cordon_http_requests_total{code="400",method="POST",route="POST /v1/sessions"} 3`,
		`cordon_http_requests_total{code="404",method="GET",route="none"} 1`,
		`cordon_connections_open{listener="tcp"} `,
		`cordon_connections_open{listener="unix"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the scrape has no %s", want)
		}
	}
	if strings.Contains(text, "id-in-no-label") {
		t.Error("an id is in the metrics")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}
