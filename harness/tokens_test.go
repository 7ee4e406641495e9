package harness

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// sample is one text of testdata/tokens.json with its token counts by OpenAI's
// tokenizers (made by testdata/tokens.cjs with js-tiktoken).
type sample struct {
	Source string `json:"source"`
	Text   string `json:"text"`
	O200k  int    `json:"o200k"`
	Cl100k int    `json:"cl100k"`
}

func loadSamples(t testing.TB) []sample {
	b, err := os.ReadFile("testdata/tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	var ss []sample
	if err := json.Unmarshal(b, &ss); err != nil {
		t.Fatal(err)
	}
	return ss
}

// errStats returns the mean absolute relative error of est and its worst case.
func errStats(ss []sample, est func(string) int, ref func(sample) int) (mean, worst float64) {
	for _, s := range ss {
		e := math.Abs(float64(est(s.Text)-ref(s))) / float64(ref(s))
		mean += e
		worst = max(worst, e)
	}
	return mean / float64(len(ss)), worst
}

// TestEstimateError measures Estimate against real tokenizer counts and holds it to
// a bound, and to beating bytes/4.
func TestEstimateError(t *testing.T) {
	ss := loadSamples(t)
	bytes4 := func(s string) int { return (len(s) + 3) / 4 }
	for _, ref := range []struct {
		name string
		f    func(sample) int
	}{{"o200k", func(s sample) int { return s.O200k }}, {"cl100k", func(s sample) int { return s.Cl100k }}} {
		m, w := errStats(ss, Estimate, ref.f)
		mb, wb := errStats(ss, bytes4, ref.f)
		t.Logf("%s over %d samples: Estimate mean error %.1f%% worst %.1f%%; bytes/4 mean %.1f%% worst %.1f%%", ref.name, len(ss), 100*m, 100*w, 100*mb, 100*wb)
		if m > 0.10 || w > 0.40 {
			t.Errorf("%s: Estimate's error mean %.1f%% worst %.1f%%; want at most 10%% and 40%%", ref.name, 100*m, 100*w)
		}
		if m >= mb {
			t.Errorf("%s: Estimate (mean error %.1f%%) no better than bytes/4 (%.1f%%)", ref.name, 100*m, 100*mb)
		}
	}
}
