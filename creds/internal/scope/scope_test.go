package scope

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/errdefs"
)

func TestReader(t *testing.T) {
	r := New("credentials X: scope", map[string]any{
		"list": []any{"a", "b"}, "map": map[string]any{"k": "v"}, "n": 3, "s": "str",
		"badlist": []any{"a", 2}, "typo": true,
	})
	if got := r.Strings("list", true); strings.Join(got, ",") != "a,b" {
		t.Errorf("Strings = %q", got)
	}
	if got := r.StringMap("map", true); got["k"] != "v" {
		t.Errorf("StringMap = %v", got)
	}
	if r.Int("n") != 3 || r.String("s", true) != "str" || r.Int("absent") != 0 {
		t.Error("Int or String")
	}
	r.Strings("badlist", false)
	r.Strings("required", true)
	err := r.Err()
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"credentials X: scope.badlist[1]", "scope.required: required", "scope.typo: unknown key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
	if r.Err().Error() != err.Error() {
		t.Error("Err is not idempotent")
	}
}
