package harness

import (
	"unicode/utf8"
)

// Per-message framing the APIs add around content (role markers, block headers).
const (
	messageOverhead = 4
	blockOverhead   = 3
)

// Estimate guesses how many tokens a model's tokenizer makes of s, without one. It
// counts the pieces a byte-pair tokenizer rarely merges: runs of letters (about one
// token per word, more for long words), digits (three to a token), each punctuation
// or symbol byte, newlines and runs of indentation, and one per non-ASCII character.
// Measured against OpenAI's o200k and cl100k tokenizers on code, docs, logs and
// JSON (TestEstimateError), it is closer than bytes/4; Anthropic's tokenizer is not
// public, and [History] corrects the estimate with each response's usage.
func Estimate(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isLetter(c):
			j := i
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			n += wordTokens(j - i)
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n += (j - i + 2) / 3
			i = j
		case isSpace(c):
			j := i
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j-i > 1 || c != ' ' || j == len(s) {
				n++ // a newline, indentation or alignment; a single space joins what follows
			}
			i = j
		case c < utf8.RuneSelf:
			j := i
			for j < len(s) && s[j] < utf8.RuneSelf && !isSpace(s[j]) && !isLetter(s[j]) && !(s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if j < len(s) && isLetter(s[j]) {
				n += (j - i) / 2 // the last one joins the word: ".Text", "(ctx"
			} else {
				n += (j - i + 1) / 2 // pairs often merge: "//", ":=", "),"
			}
			i = j
		default:
			_, w := utf8.DecodeRuneInString(s[i:])
			n++
			i += w
		}
	}
	return n
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' || c == '_' }

// wordTokens: common words up to 7 letters are one token; longer ones split about
// every 5 letters.
func wordTokens(l int) int {
	if l <= 7 {
		return 1
	}
	return 1 + (l-3)/5
}

func estimateText(s string) int { return Estimate(s) }

func estimateResult(r Result) int {
	return blockOverhead + Estimate(r.CallID) + Estimate(r.Content)
}

func estimateCall(c Call) int {
	return blockOverhead + Estimate(c.ID) + Estimate(c.Name) + Estimate(string(c.Input))
}

func estimateCalls(cs []Call) int {
	n := 0
	for _, c := range cs {
		n += estimateCall(c)
	}
	return n
}

func estimateMessage(m Message) int {
	n := messageOverhead + Estimate(m.Text) + estimateCalls(m.Calls)
	for _, r := range m.Results {
		n += estimateResult(r)
	}
	return n
}

func estimateRequest(system string, msgs []Message) int {
	n := messageOverhead + Estimate(system)
	for _, m := range msgs {
		n += estimateMessage(m)
	}
	return n
}
