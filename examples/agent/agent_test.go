package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAgentEchoHi runs the agent on a real cordon session (bwrap) against a loopback
// Messages API that asks for one exec of `echo hi`, checks that the result it gets
// back says hi, and ends. It needs `make build` and bwrap.
func TestAgentEchoHi(t *testing.T) {
	cordon, _ := filepath.Abs("../../bin/cordon")
	if _, err := os.Stat(cordon); err != nil {
		t.Skip("no bin/cordon: run make build")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("no bwrap")
	}
	var mu sync.Mutex
	var turns int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []struct {
				Role    string            `json:"role"`
				Content []json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct{ Name string } `json:"tools"`
		}
		if r.URL.Path != "/v1/messages" || json.Unmarshal(raw, &body) != nil || len(body.Tools) != 1 || body.Tools[0].Name != "exec" {
			t.Errorf("bad request %s %s", r.URL.Path, raw)
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		turns++
		n := turns
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		usage := `"usage":{"input_tokens":100,"output_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}`
		if n == 1 {
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","content":[{"type":"tool_use","id":"toolu_1","name":"exec","input":{"command":"echo hi"}}],%s}`, usage)
			return
		}
		last := body.Messages[len(body.Messages)-1]
		if !bytes.Contains(last.Content[0], []byte(`exit code 0\nhi`)) || !bytes.Contains(last.Content[0], []byte(`"tool_use_id":"toolu_1"`)) {
			t.Errorf("the tool result is not the output of echo hi: %s", last.Content[0])
		}
		fmt.Fprintf(w, `{"id":"msg_2","type":"message","role":"assistant","model":"m","stop_reason":"end_turn","content":[{"type":"text","text":"all done"}],%s}`, usage)
	}))
	defer srv.Close()
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")
	dir := t.TempDir()
	t.Chdir(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"-cordon", cordon, "-base-url", srv.URL, "-model", "m", "say hi"}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Logf("agent output:\n%s", out.String())
	for _, want := range []string{"$ echo hi\nhi\n", "all done"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q; want %q in it", out.String(), want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if turns != 2 {
		t.Errorf("%d model calls; want 2", turns)
	}
}
