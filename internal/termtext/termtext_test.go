package termtext

import "testing"

func TestLineAndText(t *testing.T) {
	for _, tt := range []struct{ in, line, text string }{
		{"plain café\tx", "plain café\tx", "plain café\tx"},
		{"a\nb", `a\x0ab`, "a\nb"},
		{"\x1b[31mred", `\x1b[31mred`, `\x1b[31mred`},
		{"\x9b2J", `\x9b2J`, `\x9b2J`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`, `evil\u202egnp.exe`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`, `zero\u200bwidth\ufeff`},
		{"sep\u2028line", `sep\u2028line`, `sep\u2028line`},
		{"bad\xffutf8", `bad\xffutf8`, `bad\xffutf8`},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"cr\r\n", `cr\x0d\x0a`, "cr\\x0d\n"},
	} {
		if got := Line(tt.in); got != tt.line {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
		}
		if got := Text(tt.in); got != tt.text {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.text)
		}
	}
}

func FuzzLine(f *testing.F) {
	f.Add("a\n\x1b\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Line(s), Text(s)} {
			for i := 0; i < len(out); i++ {
				if c := out[i]; (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f {
					t.Fatalf("control byte %#x left in %q", c, out)
				}
			}
		}
		if l := Line(s); containsNewline(l) {
			t.Fatalf("newline left in Line(%q) = %q", s, l)
		}
	})
}

func containsNewline(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return true
		}
	}
	return false
}
