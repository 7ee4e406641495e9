package harness

import (
	"context"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// OpenAISummarizer is a [Summarizer] on OpenAI's Chat Completions API, through the
// official Go SDK. With a BaseURL it reaches OpenAI-compatible servers (llama.cpp,
// vLLM, Ollama and the like).
type OpenAISummarizer struct {
	client openai.Client
	cfg    ModelConfig
}

// NewOpenAI returns a client for a Chat Completions API.
func NewOpenAI(cfg ModelConfig) (*OpenAISummarizer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{option.WithMaxRetries(0)} // retry does it, bounded
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &OpenAISummarizer{client: openai.NewClient(opts...), cfg: cfg}, nil
}

// Client is the SDK client, for a harness's own calls (see [OpenAIMessages]).
func (s *OpenAISummarizer) Client() *openai.Client { return &s.client }

// Summarize implements Summarizer.Summarize.
func (s *OpenAISummarizer) Summarize(ctx context.Context, req SummaryRequest) (Summary, error) {
	params := openai.ChatCompletionNewParams{
		Model:               s.cfg.Model,
		MaxCompletionTokens: openai.Int(int64(max(req.MaxTokens, 1))),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(summaryPrompt),
			openai.UserMessage(req.Transcript),
		},
	}
	return summarize(ctx, "openai", s.cfg, openaiStatus, func(ctx context.Context) (Summary, error) {
		c, err := s.client.Chat.Completions.New(ctx, params)
		if err != nil {
			return Summary{}, err
		}
		if len(c.Choices) == 0 {
			return Summary{}, errors.New("the response has no choices")
		}
		return Summary{Text: c.Choices[0].Message.Content, Usage: OpenAIUsage(c.Usage)}, nil
	})
}

func openaiStatus(err error) (int, http.Header, bool) {
	var e *openai.Error
	if !errors.As(err, &e) {
		return 0, nil, false
	}
	var h http.Header
	if e.Response != nil {
		h = e.Response.Header
	}
	return e.StatusCode, h, true
}

// OpenAIUsage converts a response's usage.
func OpenAIUsage(u openai.CompletionUsage) Usage {
	return Usage{Input: int(u.PromptTokens), Output: int(u.CompletionTokens)}
}

// OpenAIMessages converts a Request to Chat Completions messages: the system prompt
// first, each result as a tool message, then the user's text. OpenAI caches prompt
// prefixes by itself; the stable prefix is what makes it hit.
func OpenAIMessages(req Request) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if req.System != "" {
		out = append(out, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			out = append(out, openaiAssistant(m))
			continue
		}
		for _, r := range m.Results {
			out = append(out, openai.ToolMessage(r.Content, r.CallID))
		}
		if m.Text != "" {
			out = append(out, openai.UserMessage(m.Text))
		}
	}
	return out
}

func openaiAssistant(m Message) openai.ChatCompletionMessageParamUnion {
	a := openai.ChatCompletionAssistantMessageParam{}
	if m.Text != "" || len(m.Calls) == 0 {
		a.Content.OfString = openai.String(m.Text)
	}
	for _, c := range m.Calls {
		args := string(c.Input)
		if args == "" {
			args = "{}"
		}
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
			},
		})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}
