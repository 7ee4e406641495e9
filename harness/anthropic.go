package harness

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// summaryPrompt is the summarizer's system prompt.
const summaryPrompt = `You compact the history of a coding agent's session so that it can go on working.
Write a summary of the transcript you are given: the task and the user's requests, what was done and decided,
the files read or changed and what matters in them, commands run and their outcome, errors still open, and what
remains to do. Keep paths, names, numbers and error messages exact. Write only the summary.`

// AnthropicSummarizer is a [Summarizer] on Anthropic's Messages API, through the
// official Go SDK.
type AnthropicSummarizer struct {
	client anthropic.Client
	cfg    ModelConfig
}

// NewAnthropic returns a client for Anthropic's Messages API.
func NewAnthropic(cfg ModelConfig) (*AnthropicSummarizer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &AnthropicSummarizer{client: anthropic.NewClient(anthropicOptions(cfg)...), cfg: cfg}, nil
}

func anthropicOptions(cfg ModelConfig) []option.RequestOption {
	opts := []option.RequestOption{option.WithMaxRetries(0)} // retry does it, bounded
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return opts
}

// Client is the SDK client, for a harness's own calls (see [AnthropicParams]).
func (s *AnthropicSummarizer) Client() *anthropic.Client { return &s.client }

// Summarize implements Summarizer.Summarize.
func (s *AnthropicSummarizer) Summarize(ctx context.Context, req SummaryRequest) (Summary, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(s.cfg.Model),
		MaxTokens: int64(max(req.MaxTokens, 1)),
		System:    []anthropic.TextBlockParam{{Text: summaryPrompt}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(req.Transcript))},
	}
	return summarize(ctx, "anthropic", s.cfg, anthropicStatus, func(ctx context.Context) (Summary, error) {
		m, err := s.client.Messages.New(ctx, params)
		if err != nil {
			return Summary{}, err
		}
		return Summary{Text: AnthropicText(m), Usage: AnthropicUsage(m.Usage)}, nil
	})
}

func anthropicStatus(err error) (int, http.Header, bool) {
	var e *anthropic.Error
	if !errors.As(err, &e) {
		return 0, nil, false
	}
	var h http.Header
	if e.Response != nil {
		h = e.Response.Header
	}
	return e.StatusCode, h, true
}

// AnthropicText is the text of a message's text blocks.
func AnthropicText(m *anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// AnthropicUsage converts a response's usage: every input token counts, cached or not.
func AnthropicUsage(u anthropic.Usage) Usage {
	return Usage{Input: int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens), Output: int(u.OutputTokens)}
}

// AnthropicParams converts a Request to the Messages API's system and messages. Cache
// breakpoints (cache_control ephemeral) mark the end of the system prompt and of the
// stable prefix (the message before the last), so each request reads the previous
// one's prefix from the prompt cache.
func AnthropicParams(req Request) ([]anthropic.TextBlockParam, []anthropic.MessageParam) {
	var system []anthropic.TextBlockParam
	if req.System != "" {
		system = []anthropic.TextBlockParam{{Text: req.System, CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	}
	msgs := make([]anthropic.MessageParam, 0, len(req.Messages))
	for i, m := range req.Messages {
		blocks := anthropicBlocks(m)
		if i == len(req.Messages)-2 && len(blocks) > 0 {
			setCacheControl(blocks[len(blocks)-1])
		}
		if m.Role == RoleAssistant {
			msgs = append(msgs, anthropic.NewAssistantMessage(blocks...))
		} else {
			msgs = append(msgs, anthropic.NewUserMessage(blocks...))
		}
	}
	return system, msgs
}

func anthropicBlocks(m Message) []anthropic.ContentBlockParamUnion {
	var blocks []anthropic.ContentBlockParamUnion
	for _, r := range m.Results {
		blocks = append(blocks, anthropic.NewToolResultBlock(r.CallID, r.Content, r.IsError))
	}
	if m.Text != "" {
		blocks = append(blocks, anthropic.NewTextBlock(m.Text))
	}
	for _, c := range m.Calls {
		input := c.Input
		if len(input) == 0 {
			input = []byte("{}")
		}
		blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, input, c.Name))
	}
	if len(blocks) == 0 { // the API refuses empty content
		blocks = append(blocks, anthropic.NewTextBlock("(empty)"))
	}
	return blocks
}

func setCacheControl(b anthropic.ContentBlockParamUnion) {
	cc := anthropic.NewCacheControlEphemeralParam()
	switch {
	case b.OfText != nil:
		b.OfText.CacheControl = cc
	case b.OfToolResult != nil:
		b.OfToolResult.CacheControl = cc
	case b.OfToolUse != nil:
		b.OfToolUse.CacheControl = cc
	}
}
