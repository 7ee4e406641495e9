package audit

import (
	"fmt"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

// BenchmarkWriter measures one Emit of a typical egress event: encode, redact, chain,
// write(2), and fsync as the policy says.
func BenchmarkWriter(b *testing.B) {
	ev := event.Event{Type: event.NetAllow, Cmd: "2", Body: map[string]any{
		"host": "proxy.golang.org", "port": 443, "addr": "142.250.1.1", "proto": "connect",
		"rule": "proxy.golang.org:443", "reason": "host \"proxy.golang.org\" matches rule proxy.golang.org:443",
	}}
	cases := []struct {
		name     string
		sync     SyncPolicy
		secrets  int
		parallel bool
	}{
		{"sync=close", SyncClose, 0, false},
		{"sync=every", SyncEvery, 0, false},
		{"sync=close/secrets=10", SyncClose, 10, false},
		{"sync=close/parallel", SyncClose, 0, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			red := NewRedactor()
			for i := range c.secrets {
				if err := red.Add(fmt.Sprintf("S%d", i), fmt.Sprintf("secret-value-%02d", i)); err != nil {
					b.Fatal(err)
				}
			}
			w, err := Create(b.TempDir(), testRun, Options{Start: testStart(), Sync: c.sync, Redactor: red})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if c.parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						w.Emit(ev)
					}
				})
			} else {
				for i := 0; i < b.N; i++ {
					w.Emit(ev)
				}
			}
			b.StopTimer()
			if err := w.Close(RunEnd{}); err != nil {
				b.Fatal(err)
			}
		})
	}
}
