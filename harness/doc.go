// Package harness keeps an agent's conversation history within a model's context
// window, for a harness that uses cordon sessions as its shell.
//
// A [History] holds the system prompt, the messages and the current turn. The harness
// adds the user's words and the tool results with [History.User] and [History.Result],
// asks for the request to send with [History.Request], and ends the turn with the
// model's answer, [History.Assistant]. Four levels keep the history small (level 1,
// the output cap and its spill file, is cordon's own):
//
//   - Strip: when a turn ends, its tool results are replaced by a stub (the first
//     [Config.StubChars] characters and the spill file's path). The model sees each
//     whole result once, in the request that follows the call.
//   - Drop: when the history passes [Config.DropAt] of the window, whole old tool
//     results are dropped, oldest first, down to [Config.DropTo]; the system prompt
//     and the first user message are kept.
//   - Compact: when it is still over, a second model summarises it (a [Summarizer]:
//     [AnthropicSummarizer] or [OpenAISummarizer]) to [Config.CompactTo] of the window.
//   - Late injection: volatile [Facts] (time, git branch, open todos, the files changed
//     this turn) go at the end of the request, in its last message, and never into the
//     history, so every request's prefix is byte-identical to the previous request up
//     to that request's last message, and the model's prompt cache keeps hitting.
//
// Token counts come from the API's usage fields when a response has them
// ([History.Assistant] takes them) and from [Estimate] otherwise.
//
// A History is not safe for concurrent use.
package harness
