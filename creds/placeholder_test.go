package creds

import (
	"strings"
	"testing"
)

func TestPlaceholderKeepsShapeNotValue(t *testing.T) {
	for _, v := range []string{
		"cordon_0123456789abcdefABCDEF0123456789",
		"ghs_16C7e42F292c6912E7710c838347Ae178B4a",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
		"hvs.CAESIJ1234567890abcdefghijklmnop",
		"short",
	} {
		p := Placeholder(v)
		if p == v || strings.Contains(v, p) || len(p) < 16 {
			t.Errorf("Placeholder(%q) = %q", v, p)
		}
		if len(v) >= 16 {
			if len(p) != len(v) {
				t.Errorf("Placeholder(%q) = %q: length differs", v, p)
			}
			if i := strings.LastIndexAny(v[:16], "_-."); i >= 0 && p[:i+1] != v[:i+1] {
				t.Errorf("Placeholder(%q) = %q: prefix not kept", v, p)
			}
		}
		if Placeholder(v) == p {
			t.Errorf("Placeholder(%q) is not random", v)
		}
	}
}
