package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// fakeModel answers turn n (from 1) of a request whose body is raw: the first asks
// for exec of `echo hi`, the second checks that the result came back and ends.
type fakeModel struct {
	path, base, key string
	answer          func(t *testing.T, n int, raw []byte) string
}

var fakeModels = map[string]fakeModel{
	"anthropic": {path: "/v1/messages", key: "ANTHROPIC_API_KEY", answer: func(t *testing.T, n int, raw []byte) string {
		usage := `"usage":{"input_tokens":100,"output_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}`
		if n == 1 {
			return `{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","content":[{"type":"tool_use","id":"toolu_1","name":"exec","input":{"command":"echo hi"}}],` + usage + `}`
		}
		if !bytes.Contains(raw, []byte(`"tool_use_id":"toolu_1"`)) || !bytes.Contains(raw, []byte(`exit code 0\nhi`)) {
			t.Errorf("the tool result is not the output of echo hi: %s", raw)
		}
		return `{"id":"msg_2","type":"message","role":"assistant","model":"m","stop_reason":"end_turn","content":[{"type":"text","text":"all done"}],` + usage + `}`
	}},
	"openai": {path: "/v1/chat/completions", base: "/v1", key: "OPENAI_API_KEY", answer: func(t *testing.T, n int, raw []byte) string {
		msg := `{"role":"assistant","content":"all done"}`
		if n == 1 {
			msg = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"exec","arguments":"{\"command\":\"echo hi\"}"}}]}`
		} else if !bytes.Contains(raw, []byte(`"role":"tool"`)) || !bytes.Contains(raw, []byte(`"tool_call_id":"call_1"`)) || !bytes.Contains(raw, []byte(`exit code 0\nhi`)) {
			t.Errorf("the tool result is not the output of echo hi: %s", raw)
		}
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":` + msg + `}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`
	}},
}

// TestAgentEchoHi runs the agent on a real cordon session (bwrap) against a loopback
// model of each API that asks for one exec of `echo hi`, checks that the result it
// gets back says hi, and ends. It needs bwrap (under CI=true, a failure without it);
// cordon is built as the integration tests build it.
func TestAgentEchoHi(t *testing.T) {
	testutil.RequireBwrap(t)
	cordon := testutil.Cordon(t)
	for provider, fm := range fakeModels {
		t.Run(provider, func(t *testing.T) { runAgent(t, cordon, provider, fm) })
	}
}

func runAgent(t *testing.T, cordon, provider string, fm fakeModel) {
	var mu sync.Mutex
	turns := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct{ Tools []json.RawMessage }
		if r.URL.Path != fm.path || json.Unmarshal(raw, &body) != nil || len(body.Tools) != 1 || !bytes.Contains(body.Tools[0], []byte(`"exec"`)) {
			t.Errorf("bad request %s %s", r.URL.Path, raw)
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		turns++
		n := turns
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, fm.answer(t, n, raw))
	}))
	defer srv.Close()
	t.Setenv(fm.key, "sk-test")
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"-provider", provider, "-cordon", cordon, "-base-url", srv.URL + fm.base, "-model", "m", "say hi"}, &out)
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
