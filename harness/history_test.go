package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func newHistory(t *testing.T, cfg Config) *History {
	t.Helper()
	h, err := New(cfg, "You are a careful coding agent.")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// step runs one scripted turn: a request, an answer that calls exec once, and its
// result of size n. It returns the request.
func step(t *testing.T, h *History, f Facts, n int) Request {
	t.Helper()
	req, err := h.Request(context.Background(), f)
	if err != nil {
		t.Fatalf("turn %d: %v", h.Turn(), err)
	}
	id := fmt.Sprintf("call_%d", h.Turn())
	if err := h.Assistant("I run a command.", []Call{{ID: id, Name: "exec", Input: json.RawMessage(`{"command":"make"}`)}}, Usage{}); err != nil {
		t.Fatal(err)
	}
	out := output(h.Turn(), n)
	if err := h.Result(Result{CallID: id, Name: "exec", Content: out, Spill: "/tmp/cordon-spill/" + id}); err != nil {
		t.Fatal(err)
	}
	return req
}

// output is n bytes of a command's output in turn.
func output(turn, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %d of turn %d: ok\n", i, turn)
	}
	return b.String()[:n]
}

func TestStripStub(t *testing.T) {
	h := newHistory(t, Config{Window: 100000})
	h.User("build it")
	step(t, h, Facts{}, 5000)
	req := step(t, h, Facts{}, 100)
	// The request after the call holds its result whole; the next, a stub.
	last := req.Messages[len(req.Messages)-1]
	if got := len(last.Results[0].Content); got != 5000 {
		t.Fatalf("current turn's result has %d characters; want 5000, whole", got)
	}
	req2 := step(t, h, Facts{}, 100)
	stub := req2.Messages[len(req2.Messages)-3].Results[0]
	want := "[stripped: exec output of 5000 characters, first 300 kept; whole output: /tmp/cordon-spill/call_1]\n"
	if !strings.HasPrefix(stub.Content, want) {
		t.Fatalf("stub = %q; want it to start with %q", stub.Content[:min(len(stub.Content), 120)], want)
	}
	if got := len(stub.Content) - len(want); got != 300 {
		t.Errorf("stub keeps %d characters; want 300", got)
	}
	short := req2.Messages[len(req2.Messages)-1].Results[0]
	if len(short.Content) != 100 || strings.HasPrefix(short.Content, "[stripped") {
		t.Errorf("a result under 300 characters changed: %q", short.Content)
	}
	if s := h.Stats().Stripped; s != 1 {
		t.Errorf("Stripped = %d; want 1", s)
	}
}

func TestStripNoSpillAndRunes(t *testing.T) {
	r, ok := strip(Result{Name: "read_file", Content: strings.Repeat("é", 400)}, 300)
	if !ok {
		t.Fatal("not stripped")
	}
	head, body, _ := strings.Cut(r.Content, "\n")
	if want := "[stripped: read_file output of 400 characters, first 300 kept; the whole output was not kept]"; head != want {
		t.Errorf("header %q; want %q", head, want)
	}
	if body != strings.Repeat("é", 300) {
		t.Errorf("body is not the first 300 characters (%d bytes)", len(body))
	}
}

// TestPrefixStable: every request equals the previous one up to that one's last
// message, with facts that change every turn.
func TestPrefixStable(t *testing.T) {
	h := newHistory(t, Config{Window: 100000})
	h.User("fix the failing test")
	var prev Request
	for i := range 30 {
		f := Facts{Time: time.Unix(int64(1e9+i), 0), Branch: "main", Todos: []string{fmt.Sprint("todo ", i)}, Changed: []string{fmt.Sprintf("f%d.go", i)}}
		req := step(t, h, f, 2000)
		if i > 0 && !PrefixStable(prev, req) {
			t.Fatalf("turn %d: the prefix changed", i+1)
		}
		if last := req.Messages[len(req.Messages)-1]; !strings.HasSuffix(last.Text, f.Render()) {
			t.Fatalf("turn %d: the facts are not at the end of the last message: %q", i+1, last.Text)
		}
		for _, m := range req.Messages[:len(req.Messages)-1] {
			if strings.Contains(m.Text, "<context>") {
				t.Fatalf("turn %d: facts in the prefix: %q", i+1, m.Text)
			}
		}
		prev = req
	}
}

func TestDrop(t *testing.T) {
	h := newHistory(t, Config{Window: 10000})
	h.User("the first message, kept")
	var req Request
	for h.Stats().Dropped == 0 {
		req = step(t, h, Facts{}, 2000)
		if h.Turn() > 200 {
			t.Fatal("never dropped")
		}
	}
	if req.Tokens > int(0.85*10000) {
		t.Errorf("after dropping the request has %d tokens; want at most 8500", req.Tokens)
	}
	if req.Dropped == 0 || req.Compacted {
		t.Errorf("Dropped = %d, Compacted = %v; want some dropped, no compaction", req.Dropped, req.Compacted)
	}
	if m := req.Messages[0]; m.Text != "the first message, kept" {
		t.Errorf("first message = %q", m.Text)
	}
	if req.System != h.System() {
		t.Error("system prompt changed")
	}
	// Oldest first: the results left are the newest, in order, each with its call.
	calls := map[string]bool{}
	var turns []int
	for _, m := range req.Messages {
		for _, c := range m.Calls {
			calls[c.ID] = true
		}
		for _, r := range m.Results {
			if !calls[r.CallID] {
				t.Errorf("result %s has no call before it", r.CallID)
			}
			turns = append(turns, m.Turn)
		}
	}
	if last := req.Messages[len(req.Messages)-1].Turn; len(turns) == 0 || turns[len(turns)-1] != last || turns[0] <= 2 {
		t.Errorf("results left from turns %v; want the newest ones, up to the current turn", turns)
	}
	checkAlternation(t, req.Messages)
}

func checkAlternation(t *testing.T, msgs []Message) {
	t.Helper()
	for i, m := range msgs {
		want := RoleUser
		if i%2 == 1 {
			want = RoleAssistant
		}
		if m.Role != want {
			t.Fatalf("message %d is %v; want %v", i, m.Role, want)
		}
	}
}

// fakeSummarizer returns a fixed summary and records what it was asked.
type fakeSummarizer struct {
	calls []SummaryRequest
	err   error
}

func (f *fakeSummarizer) Summarize(_ context.Context, req SummaryRequest) (Summary, error) {
	f.calls = append(f.calls, req)
	return Summary{Text: "The agent ran make 40 times."}, f.err
}

func TestCompact(t *testing.T) {
	sum := &fakeSummarizer{}
	// Long assistant texts cannot be dropped, so only compaction can help.
	h := newHistory(t, Config{Window: 10000, Summarizer: sum})
	h.User("the first message, kept")
	var req Request
	for len(sum.calls) == 0 && h.Turn() < 200 {
		var err error
		if req, err = h.Request(context.Background(), Facts{}); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint("c", h.Turn())
		_ = h.Assistant(strings.Repeat("thinking aloud ", 60), []Call{{ID: id, Name: "exec"}}, Usage{})
		_ = h.Result(Result{CallID: id, Name: "exec", Content: "ok"})
	}
	if !req.Compacted {
		t.Fatalf("not compacted by turn %d", h.Turn())
	}
	if got, want := sum.calls[0].MaxTokens, int(0.35*10000)-h.calibrated(estimateRequest(h.system, req.Messages[:1])); got > want || got < want-200 {
		t.Errorf("summary budget %d; want about %d", got, want)
	}
	if len(req.Messages) != 3 || !strings.HasPrefix(req.Messages[1].Text, summaryHeader) || req.Messages[0].Text != "the first message, kept" {
		t.Fatalf("compacted request: %+v", req.Messages)
	}
	if c := req.Messages[1].Calls; len(c) != 1 || req.Messages[2].Results[0].CallID != c[0].ID {
		t.Errorf("the last call was not kept with its result: %+v", req.Messages[1:])
	}
	if req.Tokens > int(0.35*10000) {
		t.Errorf("compacted request has %d tokens; want at most 3500", req.Tokens)
	}
	checkAlternation(t, req.Messages)
}

func TestCompactErrors(t *testing.T) {
	big := strings.Repeat("word ", 5000)
	h := newHistory(t, Config{Window: 4000})
	h.User(big)
	if _, err := h.Request(context.Background(), Facts{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("no summarizer: err = %v; want ErrTooLarge", err)
	}
	boom := errors.New("boom")
	h = newHistory(t, Config{Window: 4000, Summarizer: &fakeSummarizer{err: boom}})
	h.User("hi")
	_ = h.Assistant(big, nil, Usage{})
	h.User("go on")
	if _, err := h.Request(context.Background(), Facts{}); !errors.Is(err, boom) {
		t.Errorf("summarizer error: err = %v; want boom", err)
	}
}

func TestOrder(t *testing.T) {
	h := newHistory(t, Config{Window: 1000})
	if _, err := h.Request(context.Background(), Facts{}); !errors.Is(err, ErrOrder) {
		t.Errorf("empty turn: %v", err)
	}
	if err := h.Result(Result{CallID: "nope"}); !errors.Is(err, ErrOrder) {
		t.Errorf("unknown call: %v", err)
	}
	h.User("x")
	_ = h.Assistant("", []Call{{ID: "a"}, {ID: "b"}}, Usage{})
	_ = h.Result(Result{CallID: "a"})
	if _, err := h.Request(context.Background(), Facts{}); !errors.Is(err, ErrOrder) {
		t.Errorf("unanswered call: %v", err)
	}
	if _, err := New(Config{}, ""); err == nil {
		t.Error("zero window accepted")
	}
}

func TestUsageCalibrates(t *testing.T) {
	h := newHistory(t, Config{Window: 100000})
	h.User(strings.Repeat("token ", 1000))
	req, _ := h.Request(context.Background(), Facts{})
	_ = h.Assistant("ok", nil, Usage{Input: 2 * req.Tokens})
	h.User("more")
	req2, _ := h.Request(context.Background(), Facts{})
	est := estimateRequest(req2.System, req2.Messages)
	if got := req2.Tokens; got < 2*est-2 || got > 2*est+2 {
		t.Errorf("Tokens = %d; want twice the estimate %d after usage said so", got, est)
	}
}

func TestFactsRender(t *testing.T) {
	f := Facts{Time: time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC), Branch: "main\nfake: line", Changed: make([]string, 60)}
	got := f.Render()
	for _, want := range []string{"time: 2026-12-05T14:00:00Z\n", "git branch: main\\nfake: line\n", "- … and 10 more\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("Render() = %q; want it to contain %q", got, want)
		}
	}
	if (Facts{}).Render() != "" {
		t.Error("empty facts render something")
	}
	// A sweep's list past its bound: what it did not list is counted too.
	if got := (Facts{Changed: make([]string, 60), ChangedMore: 7}).Render(); !strings.Contains(got, "- … and 17 more\n") {
		t.Errorf("Render() = %q; want the 7 the sweep did not list counted", got)
	}
}
