package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is a loopback model API that checks each request as the real one would and
// answers from a script: each entry is one response, the last one repeats.
type fakeAPI struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []reply
	bodies []map[string]any // the requests' bodies, decoded
}

// reply is one scripted response: a status and headers with a body, or a
// connection dropped after part of the body (drop).
type reply struct {
	status int
	header map[string]string
	body   string
	drop   bool
	hang   bool // never answer (until the client goes away)
}

const testKey = "sk-test-key"

var apiVersion = regexp.MustCompile(`^20[0-9]{2}-[01][0-9]-[0-3][0-9]$`)

func newFakeAPI(t *testing.T, check func(*http.Request, map[string]any) error, script ...reply) *fakeAPI {
	f := &fakeAPI{t: t, script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&body); err != nil {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, 400)
			t.Errorf("request body is not JSON: %v", err)
			return
		}
		if err := check(r, body); err != nil {
			t.Errorf("request refused as the API would: %v\nbody: %s", err, raw)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, err.Error())
			return
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		rep := f.script[0]
		if len(f.script) > 1 {
			f.script = f.script[1:]
		}
		f.mu.Unlock()
		f.answer(w, r, rep)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) answer(w http.ResponseWriter, r *http.Request, rep reply) {
	switch {
	case rep.hang:
		<-r.Context().Done()
	case rep.drop:
		// Headers and half a body, then the connection closes mid-response.
		hj, ok := w.(http.Hijacker)
		if !ok {
			f.t.Error("cannot hijack")
			return
		}
		c, buf, _ := hj.Hijack()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(rep.body), rep.body[:len(rep.body)/2])
		buf.Flush()
		c.Close()
	default:
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}
}

func (f *fakeAPI) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// checkAnthropic checks a Messages API request as Anthropic does: the path, the
// headers, the body's schema, roles that alternate starting with user, each
// tool_result answering a tool_use of the message before, and at most 4 cache
// breakpoints, each {"type":"ephemeral"}.
func checkAnthropic(r *http.Request, body map[string]any) error {
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
		return fmt.Errorf("%s %s; want POST /v1/messages", r.Method, r.URL.Path)
	case r.Header.Get("X-Api-Key") != testKey && r.Header.Get("Authorization") != "Bearer "+testKey:
		// The v2 SDK sends the key as a bearer token, which the API takes too.
		return fmt.Errorf("no key: x-api-key %q, authorization %q", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
	case !apiVersion.MatchString(r.Header.Get("Anthropic-Version")): // required, a date
		return fmt.Errorf("anthropic-version %q", r.Header.Get("Anthropic-Version"))
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		return fmt.Errorf("content-type %q", r.Header.Get("Content-Type"))
	}
	if m, _ := body["model"].(string); m == "" {
		return fmt.Errorf("model missing")
	}
	if n, _ := body["max_tokens"].(float64); n < 1 {
		return fmt.Errorf("max_tokens %v", body["max_tokens"])
	}
	breakpoints := 0
	if sys, ok := body["system"]; ok {
		blocks, _ := sys.([]any)
		for _, b := range blocks {
			if err := checkBlock(b.(map[string]any), &breakpoints); err != nil {
				return fmt.Errorf("system: %w", err)
			}
		}
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return fmt.Errorf("messages missing")
	}
	uses := map[string]bool{}
	for i, mm := range msgs {
		m := mm.(map[string]any)
		want := []string{"user", "assistant"}[i%2]
		if m["role"] != want {
			return fmt.Errorf("message %d: role %v; want %s", i, m["role"], want)
		}
		blocks, _ := m["content"].([]any)
		if len(blocks) == 0 {
			return fmt.Errorf("message %d: empty content", i)
		}
		next := map[string]bool{}
		for _, bb := range blocks {
			b := bb.(map[string]any)
			if err := checkBlock(b, &breakpoints); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			switch b["type"] {
			case "tool_use":
				next[b["id"].(string)] = true
			case "tool_result":
				if !uses[b["tool_use_id"].(string)] {
					return fmt.Errorf("message %d: tool_result %v answers no tool_use of the message before", i, b["tool_use_id"])
				}
			}
		}
		uses = next
	}
	if breakpoints > 4 {
		return fmt.Errorf("%d cache_control blocks; at most 4", breakpoints)
	}
	return nil
}

func checkBlock(b map[string]any, breakpoints *int) error {
	if cc, ok := b["cache_control"]; ok {
		if m, _ := cc.(map[string]any); m["type"] != "ephemeral" {
			return fmt.Errorf("cache_control %v", cc)
		}
		*breakpoints++
	}
	switch b["type"] {
	case "text":
		if s, _ := b["text"].(string); s == "" {
			return fmt.Errorf("empty text block")
		}
	case "tool_use":
		if _, ok := b["input"].(map[string]any); !ok || b["id"] == nil || b["name"] == nil {
			return fmt.Errorf("bad tool_use %v", b)
		}
	case "tool_result":
		if b["tool_use_id"] == nil {
			return fmt.Errorf("tool_result without tool_use_id")
		}
	default:
		return fmt.Errorf("block type %v", b["type"])
	}
	return nil
}

// anthropicReply is a Messages API answer with text and usage.
func anthropicReply(text string, in int) reply {
	return reply{status: 200, header: map[string]string{"request-id": "req_1"}, body: fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":%d,"output_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`, text, in)}
}

var overloaded = reply{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}

func rateLimited(after string) reply {
	return reply{status: 429, header: map[string]string{"retry-after": after}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`}
}

// checkOpenAI checks a Chat Completions request as OpenAI does.
func checkOpenAI(r *http.Request, body map[string]any) error {
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		return fmt.Errorf("%s %s; want POST /v1/chat/completions", r.Method, r.URL.Path)
	case r.Header.Get("Authorization") != "Bearer "+testKey:
		return fmt.Errorf("authorization %q", r.Header.Get("Authorization"))
	}
	if m, _ := body["model"].(string); m == "" {
		return fmt.Errorf("model missing")
	}
	if n, ok := body["max_completion_tokens"].(float64); ok && n < 1 {
		return fmt.Errorf("max_completion_tokens %v", n)
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return fmt.Errorf("messages missing")
	}
	calls := map[string]bool{}
	for i, mm := range msgs {
		m := mm.(map[string]any)
		switch m["role"] {
		case "system", "user":
			if _, ok := m["content"].(string); !ok {
				return fmt.Errorf("message %d: content %v", i, m["content"])
			}
		case "assistant":
			tcs, _ := m["tool_calls"].([]any)
			for _, tc := range tcs {
				c := tc.(map[string]any)
				fn, _ := c["function"].(map[string]any)
				if c["type"] != "function" || fn["name"] == nil || !json.Valid([]byte(fn["arguments"].(string))) {
					return fmt.Errorf("message %d: bad tool call %v", i, c)
				}
				calls[c["id"].(string)] = true
			}
		case "tool":
			if !calls[m["tool_call_id"].(string)] {
				return fmt.Errorf("message %d: tool message for no call", i)
			}
		default:
			return fmt.Errorf("message %d: role %v", i, m["role"])
		}
	}
	return nil
}

func openaiReply(text string, in int) reply {
	return reply{status: 200, body: fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-test",
"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
"usage":{"prompt_tokens":%d,"completion_tokens":7,"total_tokens":%d}}`, text, in, in+7)}
}
