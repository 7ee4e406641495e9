package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Role says who wrote a message.
type Role int

// The two roles of a conversation; the system prompt is apart ([History.System]).
const (
	RoleUser Role = iota + 1
	RoleAssistant
)

func (r Role) String() string {
	switch r {
	case RoleUser:
		return "user"
	case RoleAssistant:
		return "assistant"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Call is a tool call the model asked for.
type Call struct {
	ID    string
	Name  string
	Input json.RawMessage // the arguments, a JSON object
}

// Result is a tool's answer to a [Call].
type Result struct {
	CallID  string
	Name    string // the tool's name, for stubs and transcripts
	Content string
	// Spill is the path of the file that holds the whole output when Content was cut
	// (cordon's spill file, wire.Result.SpillPath); "" when there is none.
	Spill   string
	IsError bool
}

// Message is one message of the history. A user message carries the results of the
// previous assistant message's calls (first) and the user's words; an assistant
// message carries the model's text and its calls.
type Message struct {
	Role    Role
	Text    string
	Calls   []Call   // assistant only
	Results []Result // user only
	Turn    int      // the turn it was sent in
}

// Usage is what a response's usage fields say about the request that got it.
type Usage struct {
	// Input is every input token of the request (for Anthropic: input_tokens plus
	// cache_creation_input_tokens plus cache_read_input_tokens; for OpenAI:
	// prompt_tokens). 0 when the response had no usage.
	Input  int
	Output int
}

// Config sets a History's window and levels. Zero fields mean the defaults.
type Config struct {
	Window    int     // the model's context window in tokens; required
	StubChars int     // characters a stripped result keeps; default 300
	DropAt    float64 // share of the window past which old results are dropped; default 0.85
	DropTo    float64 // share dropping goes down to, so it breaks the prefix rarely; default 0.70
	CompactTo float64 // share compaction goes down to; default 0.35
	// Summarizer compacts; nil means no compaction (a history still over after
	// dropping makes Request fail with ErrTooLarge).
	Summarizer Summarizer
}

// Errors returned by History methods.
var (
	// ErrTooLarge: the history cannot be brought under the window (what must be
	// kept, the system prompt, the first user message and the current turn, is too
	// large, or there is no Summarizer).
	ErrTooLarge = errors.New("history does not fit the window")
	// ErrOrder: a method was called out of the conversation's order (a result for a
	// call the model did not make, a turn ended twice).
	ErrOrder = errors.New("out of order")
)

func (c Config) withDefaults() (Config, error) {
	if c.Window <= 0 {
		return c, errors.New("harness: Config.Window must be positive")
	}
	if c.StubChars <= 0 {
		c.StubChars = 300
	}
	if c.DropAt <= 0 {
		c.DropAt = 0.85
	}
	if c.DropTo <= 0 || c.DropTo > c.DropAt {
		c.DropTo = min(0.70, c.DropAt)
	}
	if c.CompactTo <= 0 || c.CompactTo > c.DropTo {
		c.CompactTo = min(0.35, c.DropTo)
	}
	return c, nil
}

// History is an agent's conversation: the system prompt, the committed messages (the
// request's stable prefix) and the current turn's user message (its tail). Not safe
// for concurrent use.
type History struct {
	cfg    Config
	system string
	msgs   []Message // committed; alternates user, assistant; ends with assistant
	tail   Message   // the user message being built for the next request
	turn   int
	calls  map[string]bool // calls of the last assistant message not yet answered
	ratio  float64         // actual/estimated tokens of the last request with usage; 0: none
	last   int             // estimated tokens of the last request
	stats  Stats
}

// Stats counts what the levels did.
type Stats struct {
	Stripped  int // results stubbed
	Dropped   int // results dropped
	Compacted int // compactions
}

// New returns an empty history with the system prompt system.
func New(cfg Config, system string) (*History, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &History{cfg: cfg, system: system, tail: Message{Role: RoleUser}, turn: 1}, nil
}

// System is the system prompt.
func (h *History) System() string { return h.system }

// Turn is the current turn's number, from 1; a turn is one request and its answer.
func (h *History) Turn() int { return h.turn }

// Stats says what the levels have done so far.
func (h *History) Stats() Stats { return h.stats }

// Messages returns a copy of the committed messages (without the current turn's).
func (h *History) Messages() []Message { return cloneMessages(h.msgs) }

// User adds the user's words to the current turn.
func (h *History) User(text string) {
	if h.tail.Text != "" {
		h.tail.Text += "\n\n"
	}
	h.tail.Text += text
}

// Result adds a tool result to the current turn; r.CallID must name a call of the
// model's last answer that has no result yet.
func (h *History) Result(r Result) error {
	if !h.calls[r.CallID] {
		return fmt.Errorf("result for call %q: %w", r.CallID, ErrOrder)
	}
	delete(h.calls, r.CallID)
	h.tail.Results = append(h.tail.Results, r)
	return nil
}

// Assistant ends the turn with the model's answer and the usage its response
// reported (zero when it had none). The turn's user message is committed to the
// history with its results stripped (the model has seen them whole), the answer is
// appended, and a new turn starts.
func (h *History) Assistant(text string, calls []Call, u Usage) error {
	if len(h.tail.Results) == 0 && h.tail.Text == "" {
		return fmt.Errorf("answer to an empty turn: %w", ErrOrder)
	}
	if u.Input > 0 && h.last > 0 {
		h.ratio = float64(u.Input) / float64(h.last)
	}
	committed := h.tail
	committed.Turn = h.turn
	committed.Results = slicesClone(committed.Results)
	for i := range committed.Results {
		if stub, ok := strip(committed.Results[i], h.cfg.StubChars); ok {
			committed.Results[i] = stub
			h.stats.Stripped++
		}
	}
	h.msgs = append(h.msgs, committed, Message{Role: RoleAssistant, Text: text, Calls: slicesClone(calls), Turn: h.turn})
	h.tail = Message{Role: RoleUser}
	h.calls = make(map[string]bool, len(calls))
	for _, c := range calls {
		h.calls[c.ID] = true
	}
	h.turn++
	return nil
}

// Request is what to send to the model for the current turn.
type Request struct {
	System string
	// Messages alternate user and assistant and end with the current turn's user
	// message, whose text ends with the rendered Facts. All but that last message are
	// byte-identical to the previous Request's messages (but its last) unless Dropped
	// or Compacted says the history changed.
	Messages  []Message
	Tokens    int  // estimated tokens of the request (calibrated by usage, see Tokens)
	Dropped   int  // results dropped to fit it
	Compacted bool // the history was summarised to fit it
}

// Request fits the history to the window (dropping, then compacting) and returns the
// request for the current turn, with f rendered at its end.
func (h *History) Request(ctx context.Context, f Facts) (Request, error) {
	if len(h.tail.Results) == 0 && h.tail.Text == "" {
		return Request{}, fmt.Errorf("request with an empty turn: %w", ErrOrder)
	}
	if len(h.calls) > 0 {
		return Request{}, fmt.Errorf("%d calls have no result: %w", len(h.calls), ErrOrder)
	}
	tail := h.tail
	tail.Turn = h.turn
	tail.Text = joinText(tail.Text, f.Render())
	dropped, compacted, err := h.fit(ctx, tail)
	if err != nil {
		return Request{}, err
	}
	msgs := append(cloneMessages(h.msgs), tail)
	est := estimateRequest(h.system, msgs)
	h.last = est
	return Request{System: h.system, Messages: msgs, Tokens: h.calibrated(est), Dropped: dropped, Compacted: compacted}, nil
}

// Tokens is the history's size in tokens with the current turn (without facts): the
// estimate, scaled by what the last response's usage said of the estimate's error.
func (h *History) Tokens() int {
	return h.calibrated(estimateRequest(h.system, append(h.msgs[:len(h.msgs):len(h.msgs)], h.tail)))
}

func (h *History) calibrated(est int) int {
	if h.ratio <= 0 {
		return est
	}
	return int(float64(est)*min(max(h.ratio, 0.25), 4) + 0.5)
}

func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

func cloneMessages(ms []Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		m.Calls, m.Results = slicesClone(m.Calls), slicesClone(m.Results)
		out[i] = m
	}
	return out
}

func slicesClone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}
