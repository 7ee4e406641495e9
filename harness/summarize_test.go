package harness

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// provider builds a Summarizer against a fake API.
type provider struct {
	name  string
	check func(*http.Request, map[string]any) error
	ok    func(text string, in int) reply
	base  func(url string) string
	new   func(ModelConfig) (Summarizer, error)
}

var providers = []provider{
	{"anthropic", checkAnthropic, anthropicReply, func(u string) string { return u },
		func(c ModelConfig) (Summarizer, error) { return NewAnthropic(c) }},
	{"openai", checkOpenAI, openaiReply, func(u string) string { return u + "/v1" },
		func(c ModelConfig) (Summarizer, error) { return NewOpenAI(c) }},
}

func TestSummarizers(t *testing.T) {
	dropped := reply{drop: true, body: anthropicReply("cut", 1).body}
	cases := []struct {
		name     string
		script   func(p provider) []reply
		wantErr  error // nil: success
		anyErr   bool
		requests int
		waits    []time.Duration
	}{
		{name: "ok", script: func(p provider) []reply { return []reply{p.ok("the summary", 1234)} }, requests: 1},
		{name: "429 then ok", script: func(p provider) []reply { return []reply{rateLimited("3"), p.ok("the summary", 1)} },
			requests: 2, waits: []time.Duration{3 * time.Second}},
		{name: "529 overloaded twice then ok", script: func(p provider) []reply { return []reply{overloaded, overloaded, p.ok("the summary", 1)} },
			requests: 3, waits: []time.Duration{500 * time.Millisecond, time.Second}},
		{name: "529 always", script: func(p provider) []reply { return []reply{overloaded} }, anyErr: true, requests: 3},
		{name: "retry-after an hour", script: func(p provider) []reply { return []reply{rateLimited("3600")} }, wantErr: ErrRetryAfter, requests: 1},
		{name: "dropped mid-response", script: func(p provider) []reply { return []reply{dropped} }, anyErr: true, requests: 3},
		{name: "dropped then ok", script: func(p provider) []reply { return []reply{dropped, p.ok("the summary", 1)} }, requests: 2},
		{name: "400 not retried", script: func(p provider) []reply {
			return []reply{{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`}}
		}, anyErr: true, requests: 1},
		{name: "hangs", script: func(p provider) []reply { return []reply{{hang: true}} }, wantErr: context.DeadlineExceeded, requests: 1},
	}
	for _, p := range providers {
		for _, tc := range cases {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				api := newFakeAPI(t, p.check, tc.script(p)...)
				var waits []time.Duration
				cfg := ModelConfig{Model: "test-model", BaseURL: p.base(api.srv.URL), APIKey: testKey, Timeout: time.Second,
					sleep: func(_ context.Context, d time.Duration) error {
						waits = append(waits, d.Round(time.Second/2))
						return nil
					}}
				s, err := p.new(cfg)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				sum, err := s.Summarize(context.Background(), SummaryRequest{Transcript: "## user (turn 1)\nfix it\n", MaxTokens: 500})
				if time.Since(start) > 5*time.Second {
					t.Errorf("took %s", time.Since(start))
				}
				switch {
				case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
					t.Errorf("err = %v; want %v", err, tc.wantErr)
				case tc.anyErr && err == nil:
					t.Errorf("no error; got %+v", sum)
				case tc.wantErr == nil && !tc.anyErr && (err != nil || sum.Text != "the summary"):
					t.Errorf("Summarize = %+v, %v", sum, err)
				}
				if err != nil && !strings.Contains(err.Error(), p.name) {
					t.Errorf("error %q does not say which API", err)
				}
				if got := api.requests(); got != tc.requests {
					t.Errorf("%d requests; want %d", got, tc.requests)
				}
				if tc.waits != nil && !equalDurations(waits, tc.waits) {
					t.Errorf("waited %v; want %v", waits, tc.waits)
				}
				if tc.name == "ok" && sum.Usage.Input != 1234 {
					t.Errorf("usage %+v; want 1234 input tokens", sum.Usage)
				}
			})
		}
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestParamsAccepted sends a history's requests, with a drop and its notes, through
// each SDK to the checking fake: roles, tool pairing and cache breakpoints as the
// real APIs demand.
func TestParamsAccepted(t *testing.T) {
	h := newHistory(t, Config{Window: 3000})
	h.User("the task")
	var reqs []Request
	for range 40 {
		reqs = append(reqs, step(t, h, Facts{Branch: "main"}, 1500))
	}
	if h.Stats().Dropped == 0 {
		t.Fatal("nothing dropped; the test wants a dropped history")
	}
	ctx := context.Background()
	a, _ := NewAnthropic(ModelConfig{Model: "m", APIKey: testKey})
	o, _ := NewOpenAI(ModelConfig{Model: "m", APIKey: testKey})
	aapi := newFakeAPI(t, checkAnthropic, anthropicReply("ok", 1))
	oapi := newFakeAPI(t, checkOpenAI, openaiReply("ok", 1))
	for _, req := range reqs {
		system, msgs := AnthropicParams(req)
		if _, err := a.Client().Messages.New(ctx, anthropicParams(system, msgs), anthropicBase(aapi.srv.URL)); err != nil {
			t.Fatalf("anthropic: %v", err)
		}
		if _, err := o.Client().Chat.Completions.New(ctx, openaiParams(OpenAIMessages(req)), openaiBase(oapi.srv.URL+"/v1")); err != nil {
			t.Fatalf("openai: %v", err)
		}
	}
	last := aapi.bodies[len(aapi.bodies)-1]
	b, _ := json.Marshal(last)
	if n := strings.Count(string(b), `"cache_control"`); n != 2 {
		t.Errorf("%d cache breakpoints; want 2 (system, end of prefix)", n)
	}
}
