package harness

import (
	"bytes"
	"encoding/json"
)

// PrefixStable reports whether cur starts with prev's prefix: the same system prompt
// and, byte for byte, every message of prev but its last. That is what lets a
// model's prompt cache serve cur from prev.
func PrefixStable(prev, cur Request) bool {
	if prev.System != cur.System || len(prev.Messages) == 0 || len(cur.Messages) < len(prev.Messages) {
		return false
	}
	for i := range len(prev.Messages) - 1 {
		a, errA := json.Marshal(prev.Messages[i])
		b, errB := json.Marshal(cur.Messages[i])
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}
