package gate

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestValidateID: what a Service hands out passes; anything that could be more than
// an id (a separator, a dot, a NUL, a space, non-ASCII, a long string) is refused, and
// refused as not found, so a caller's answer for it is the one for a missing request.
func TestValidateID(t *testing.T) {
	s := New(Config{RunID: testRun})
	for _, id := range []string{s.newID(), "3fa2c1d0", "a-B-9"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v; want nil", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "../x", "a\x00", "a b", "é", "a.b", strings.Repeat("a", 65)} {
		if err := ValidateID(id); !errors.Is(err, ErrInvalidID) || !errors.Is(err, ErrNotFound) {
			t.Errorf("ValidateID(%q) = %v; want ErrInvalidID, matching ErrNotFound", id, err)
		}
	}
	root := t.TempDir()
	if _, err := Find(context.Background(), root, "../x", nil); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Find(../x) = %v; want ErrInvalidID", err)
	}
	if err := Decide(context.Background(), root, Decision{ID: "a/b"}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Decide(a/b) = %v; want ErrInvalidID", err)
	}
	if err := Decide(context.Background(), root, Decision{ID: "3fa2c1d0"}); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidID) {
		t.Errorf("Decide of an id no run has = %v; want ErrNotFound", err)
	}
}
