package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// strip returns r with its content cut to its first n characters and a first line
// that says so and where the whole output is, and whether it changed anything.
func strip(r Result, n int) (Result, bool) {
	total := utf8.RuneCountInString(r.Content)
	if total <= n {
		return r, false
	}
	r.Content = stubHeader(r, total, n) + "\n" + cutRunes(r.Content, n)
	return r, true
}

// stubHeader is a stub's first line, e.g.
// "[stripped: exec output of 12000 characters, first 300 kept; whole output: /tmp/spill/3.out]".
func stubHeader(r Result, total, n int) string {
	where := "the whole output was not kept"
	if r.Spill != "" {
		where = "whole output: " + r.Spill
	}
	name := r.Name
	if name == "" {
		name = "tool"
	}
	return fmt.Sprintf("[stripped: %s output of %d characters, first %d kept; %s]", name, total, n, where)
}

func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// fit brings the history with tail under DropAt of the window: it drops old results
// down to DropTo, then, when still over, compacts to CompactTo.
func (h *History) fit(ctx context.Context, tail Message) (dropped int, compacted bool, err error) {
	limit := int(h.cfg.DropAt * float64(h.cfg.Window))
	size := h.calibrated(estimateRequest(h.system, append(h.msgs[:len(h.msgs):len(h.msgs)], tail)))
	if size <= limit {
		return 0, false, nil
	}
	dropped, _ = h.drop(size, int(h.cfg.DropTo*float64(h.cfg.Window)))
	size = h.calibrated(estimateRequest(h.system, append(h.msgs[:len(h.msgs):len(h.msgs)], tail))) // drop's count is close, not exact
	if size <= limit {
		return dropped, false, nil
	}
	if h.cfg.Summarizer == nil {
		return dropped, false, fmt.Errorf("%d tokens over a limit of %d and no summarizer: %w", size, limit, ErrTooLarge)
	}
	if err := h.compact(ctx, tail); err != nil {
		return dropped, false, err
	}
	size = h.calibrated(estimateRequest(h.system, append(h.msgs[:len(h.msgs):len(h.msgs)], tail)))
	if size > limit {
		return dropped, true, fmt.Errorf("%d tokens after compaction, over a limit of %d: %w", size, limit, ErrTooLarge)
	}
	return dropped, true, nil
}

// Notes left where dropping emptied a message that must stay to keep the roles
// alternating.
const (
	droppedResults = "[old tool results dropped]"
	droppedCalls   = "[old tool calls dropped]"
)

// drop removes whole committed tool results, oldest first, each with its call, until
// size (the history's tokens) is at most target. The first user message is kept (it
// has no results). A user message and the assistant message before it that are left
// empty go together; one left empty alone gets a short note. It returns how many
// results went and the size left.
func (h *History) drop(size, target int) (int, int) {
	n := 0
	for i := 2; i < len(h.msgs) && size > target; i += 2 {
		u, a := &h.msgs[i], &h.msgs[i-1]
		for len(u.Results) > 0 && size > target {
			r := u.Results[0]
			u.Results = u.Results[1:]
			size -= h.calibrated(estimateResult(r))
			if k := slices.IndexFunc(a.Calls, func(c Call) bool { return c.ID == r.CallID }); k >= 0 {
				size -= h.calibrated(estimateCall(a.Calls[k]))
				a.Calls = slices.Delete(a.Calls, k, k+1)
			}
			n++
		}
		if len(u.Results) > 0 {
			continue
		}
		switch {
		case u.Text == "" && a.Text == "" && len(a.Calls) == 0:
			h.msgs = slices.Delete(h.msgs, i-1, i+1)
			i -= 2
		case u.Text == "":
			u.Text = droppedResults
		case a.Text == "" && len(a.Calls) == 0:
			a.Text = droppedCalls
		}
	}
	h.stats.Dropped += n
	return n, size
}

// summaryHeader opens the assistant message that replaces a compacted history.
const summaryHeader = "[Summary of the conversation so far, compacted to fit the context window]\n"

// compact replaces every committed message but the first user message by a summary
// that a Summarizer writes in at most CompactTo of the window less what is kept. The
// last assistant message's calls (whose results are in tail) are kept with it.
func (h *History) compact(ctx context.Context, tail Message) error {
	if len(h.msgs) < 2 {
		return fmt.Errorf("nothing to compact: %w", ErrTooLarge)
	}
	first, last := h.msgs[0], h.msgs[len(h.msgs)-1]
	keep := estimateRequest(h.system, []Message{first, tail}) + estimateCalls(last.Calls) + estimateText(summaryHeader)
	budget := int(h.cfg.CompactTo*float64(h.cfg.Window)) - h.calibrated(keep)
	if budget < 64 {
		return fmt.Errorf("the system prompt, first message and current turn leave %d tokens for a summary: %w", budget, ErrTooLarge)
	}
	s, err := h.cfg.Summarizer.Summarize(ctx, SummaryRequest{Transcript: Transcript(h.msgs[1:]), MaxTokens: budget})
	if err != nil {
		return fmt.Errorf("compacting: %w", err)
	}
	text := cutRunes(strings.TrimSpace(s.Text), budget*3) // a token holds 3 characters or more
	summary := Message{Role: RoleAssistant, Text: summaryHeader + text, Calls: last.Calls, Turn: h.turn}
	h.msgs = []Message{first, summary}
	h.stats.Compacted++
	return nil
}

// Transcript renders messages as plain text for a summarizer.
func Transcript(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "## %s (turn %d)\n", m.Role, m.Turn)
		for _, r := range m.Results {
			fmt.Fprintf(&b, "[result of %s %s]\n%s\n", r.Name, r.CallID, r.Content)
		}
		if m.Text != "" {
			b.WriteString(m.Text + "\n")
		}
		for _, c := range m.Calls {
			fmt.Fprintf(&b, "[call %s %s] %s\n", c.Name, c.ID, c.Input)
		}
	}
	return b.String()
}
