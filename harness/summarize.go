package harness

import "context"

// Summarizer writes the summary that replaces a compacted history.
type Summarizer interface {
	Summarize(ctx context.Context, req SummaryRequest) (Summary, error)
}

// SummaryRequest is what to summarise and in how many tokens.
type SummaryRequest struct {
	Transcript string // the messages to summarise, as Transcript renders them
	MaxTokens  int    // the summary's budget
}

// Summary is a Summarizer's answer.
type Summary struct {
	Text  string
	Usage Usage
}
