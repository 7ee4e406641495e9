package audit

import (
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"72h", 72 * time.Hour, false},
		{"30d", 30 * 24 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"d", 0, true},
		{"1.5d", 0, true},
		{"soon", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseAge(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}
