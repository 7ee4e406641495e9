package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cordonhq/cordon/harness"
)

// model is one step of the agent: the answer to a request.
type model interface {
	next(ctx context.Context, req harness.Request) (text string, calls []harness.Call, u harness.Usage, err error)
}

const execDescription = "Run a shell command (sh -c) in the project's cordon sandbox. Returns the exit code and the output, " +
	"cut at 4000 characters per stream; the whole output is in the spill file the result names."

var execSchema = map[string]any{
	"command": map[string]any{"type": "string", "description": "the shell command"},
}

// anthropicModel answers through the Messages API.
type anthropicModel struct {
	c         *anthropic.Client
	name      string
	maxTokens int64
}

func (m anthropicModel) next(ctx context.Context, req harness.Request) (string, []harness.Call, harness.Usage, error) {
	system, msgs := harness.AnthropicParams(req)
	tool := anthropic.ToolParam{Name: "exec", Description: anthropic.String(execDescription),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: execSchema, Required: []string{"command"}}}
	resp, err := m.c.Messages.New(ctx, anthropic.MessageNewParams{
		Model: anthropic.Model(m.name), MaxTokens: m.maxTokens, System: system, Messages: msgs,
		Tools: []anthropic.ToolUnionParam{{OfTool: &tool}},
	})
	if err != nil {
		return "", nil, harness.Usage{}, err
	}
	var calls []harness.Call
	for _, b := range resp.Content {
		if b.Type == "tool_use" {
			calls = append(calls, harness.Call{ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	return harness.AnthropicText(resp), calls, harness.AnthropicUsage(resp.Usage), nil
}

// openaiModel answers through the Chat Completions API (OpenAI or a compatible server).
type openaiModel struct {
	c         *openai.Client
	name      string
	maxTokens int64
}

func (m openaiModel) next(ctx context.Context, req harness.Request) (string, []harness.Call, harness.Usage, error) {
	tool := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "exec", Description: openai.String(execDescription),
		Parameters: shared.FunctionParameters{"type": "object", "properties": execSchema, "required": []string{"command"}},
	})
	resp, err := m.c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: m.name, Messages: harness.OpenAIMessages(req), MaxCompletionTokens: openai.Int(m.maxTokens),
		Tools: []openai.ChatCompletionToolUnionParam{tool},
	})
	if err != nil {
		return "", nil, harness.Usage{}, err
	}
	if len(resp.Choices) == 0 {
		return "", nil, harness.Usage{}, errors.New("the response has no choices")
	}
	msg := resp.Choices[0].Message
	var calls []harness.Call
	for _, tc := range msg.ToolCalls {
		calls = append(calls, harness.Call{ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
	}
	return msg.Content, calls, harness.OpenAIUsage(resp.Usage), nil
}
