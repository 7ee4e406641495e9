package harness

import (
	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

func anthropicParams(system []anthropic.TextBlockParam, msgs []anthropic.MessageParam) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 1024, System: system, Messages: msgs}
}

func anthropicBase(u string) aoption.RequestOption { return aoption.WithBaseURL(u) }

func openaiParams(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-test", Messages: msgs}
}

func openaiBase(u string) ooption.RequestOption { return ooption.WithBaseURL(u) }
