package seatbelt

import "testing"

// BenchmarkProfile is profile generation for each example contract (compiled once; the
// host's links resolved on every call, as a run would).
func BenchmarkProfile(b *testing.B) {
	for name, yaml := range examples(b) {
		b.Run(name, func(b *testing.B) {
			f := newFixture(b)
			plan := f.plan(b, yaml)
			p := Params{ProxyPort: testPort, RunDir: f.run}
			for b.Loop() {
				if _, err := Generate(plan, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
