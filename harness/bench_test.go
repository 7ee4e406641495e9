package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// benchSummarizer answers with a summary of a fixed size, as a model would.
type benchSummarizer struct{}

func (benchSummarizer) Summarize(_ context.Context, req SummaryRequest) (Summary, error) {
	return Summary{Text: strings.Repeat("The agent edited parser.go and ran the tests. ", min(req.MaxTokens/12, 200))}, nil
}

// scriptResult is one scripted session's figures.
type scriptResult struct {
	turns, stable, drops, compactions int
	changed                           int // turns that dropped or compacted
	full                              int // the turn that did not fit (ErrTooLarge); 0: all did
	peak, final, raw                  int // tokens: largest and last request, and the last without any level
}

// runScript plays a scripted session of n turns against a 100k window: each turn the
// model writes 600 to 3000 characters and calls exec, whose output is 100 characters
// to 30 KB (cordon's cap); a new user message every 25 turns; facts change every turn.
func runScript(tb testing.TB, cfg Config, n int) scriptResult {
	h, err := New(cfg, strings.Repeat("You are a coding agent working in a cordon sandbox. ", 40))
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var res scriptResult
	var prev Request
	raw := messageOverhead + Estimate(h.System())
	h.User("Make the parser accept trailing commas and keep the tests green.")
	for turn := range n {
		if turn > 0 && turn%25 == 0 {
			h.User(fmt.Sprintf("Next: step %d of the plan.", turn/25))
		}
		f := Facts{Time: time.Unix(int64(1.8e9+60*turn), 0), Branch: "feature/commas",
			Todos: []string{"parser", "tests"}, Changed: []string{fmt.Sprintf("parser_%d.go", turn%7)}}
		req, err := h.Request(context.Background(), f)
		if errors.Is(err, ErrTooLarge) {
			res.full = turn + 1
			break
		}
		if err != nil {
			tb.Fatalf("turn %d: %v", turn, err)
		}
		res.turns++
		if turn > 0 && PrefixStable(prev, req) {
			res.stable++
		}
		if req.Dropped > 0 {
			res.drops++
		}
		if req.Compacted {
			res.compactions++
		}
		if req.Dropped > 0 || req.Compacted {
			res.changed++
		}
		res.peak, res.final = max(res.peak, req.Tokens), req.Tokens
		prev = req
		text := output(turn, 600+rng.IntN(2400))
		call := Call{ID: fmt.Sprintf("toolu_%03d", turn), Name: "exec", Input: json.RawMessage(`{"command":"go test ./parser/"}`)}
		out := output(turn, 100+rng.IntN(30000))
		raw += estimateMessage(req.Messages[len(req.Messages)-1]) + estimateMessage(Message{Text: text, Calls: []Call{call}})
		if err := h.Assistant(text, []Call{call}, Usage{}); err != nil {
			tb.Fatal(err)
		}
		if err := h.Result(Result{CallID: call.ID, Name: "exec", Content: out, Spill: "/tmp/cordon-spill/" + call.ID + ".out"}); err != nil {
			tb.Fatal(err)
		}
	}
	res.raw = raw
	return res
}

var benchTable sync.Once

// BenchmarkPrefixStability plays a scripted 200-turn session with a 100k window at
// each level and prints, once, the share of turns whose request starts with the
// previous request but its last message, and the tokens the history holds.
func BenchmarkPrefixStability(b *testing.B) {
	const window = 100000
	levels := []struct {
		name string
		cfg  Config
	}{
		{"strip", Config{Window: window, DropAt: 1000}},
		{"strip+drop", Config{Window: window}},
		{"strip+drop+compact", Config{Window: window, Summarizer: benchSummarizer{}}},
	}
	results := make([]scriptResult, len(levels))
	for b.Loop() {
		for i, l := range levels {
			results[i] = runScript(b, l.cfg, 200)
		}
	}
	benchTable.Do(func() {
		w := os.Stdout
		fmt.Fprintf(w, "\nprefix stability, scripted 200-turn session, 100k window (tokens estimated)\n")
		fmt.Fprintf(w, "%-20s %8s %8s %6s %8s %9s %9s %12s\n", "levels", "stable", "share", "drops", "compacts", "peak", "final", "cap only")
		for i, r := range results {
			share := 100 * float64(r.stable) / float64(r.turns-1)
			exempt := 100 * float64(r.stable) / float64(r.turns-1-r.changed)
			fmt.Fprintf(w, "%-20s %4d/%3d %7.1f%% %6d %8d %9d %9d %12d  (%.1f%% of turns that neither drop nor compact)\n",
				levels[i].name, r.stable, r.turns-1, share, r.drops, r.compactions, r.peak, r.final, r.raw, exempt)
			if r.full > 0 {
				fmt.Fprintf(w, "%-20s turn %d did not fit the window (ErrTooLarge)\n", "", r.full)
			}
		}
	})
}

// TestScriptStable holds the benchmark's claim: every turn that neither drops nor
// compacts keeps the prefix.
func TestScriptStable(t *testing.T) {
	r := runScript(t, Config{Window: 100000, Summarizer: benchSummarizer{}}, 200)
	if want := r.turns - 1 - r.changed; r.stable != want {
		t.Errorf("%d turns kept the prefix; want %d (%d turns, %d drops, %d compactions)", r.stable, want, r.turns, r.drops, r.compactions)
	}
	if r.full > 0 || r.turns != 200 {
		t.Errorf("turn %d did not fit", r.full)
	}
	if r.peak > 85000 {
		t.Errorf("peak %d tokens; want at most 85000", r.peak)
	}
}
