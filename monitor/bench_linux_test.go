package monitor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Overhead benchmarks: the same workload in a cgroup, with the monitor off and on. Each
// op is one whole run of the workload; compare the two ns/op (make bench).

func benchWorkload(b *testing.B, dir string, env []string, name string, args ...string) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			h := newHarnessHooks(b, hostProfile(os.TempDir()), Options{}, false)
			if !on {
				h.m.Close() // the cgroup stays; nothing watches it
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cmd := h.command(env, name, args...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
			b.StopTimer()
			if on {
				h.m.drain()
				s := h.m.Stats()
				b.ReportMetric(float64(s.Events)/float64(b.N), "events/op")
				b.ReportMetric(float64(s.Lost), "lost")
			}
		})
	}
}

// BenchmarkFindCat: find /usr/share -type f | xargs cat > /dev/null (≈46,000 files).
func BenchmarkFindCat(b *testing.B) {
	requireBPF(b)
	benchWorkload(b, "/", nil, "/bin/sh", "-c", "find /usr/share -type f -print0 | xargs -0 cat > /dev/null")
}

// BenchmarkGoBuild: go build of cordon's own command with a warm build cache (mostly
// cache look-ups and the link: many opens and execs).
func BenchmarkGoBuild(b *testing.B) {
	requireBPF(b)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	root, _ := filepath.Abs("..")
	out := filepath.Join(b.TempDir(), "cordon")
	env := append(os.Environ(), "CGO_ENABLED=0")
	if err := exec.Command(goBin, "build", "-C", root, "-o", out, "./cmd/cordon").Run(); err != nil {
		b.Skipf("go build: %v", err)
	}
	benchWorkload(b, root, env, goBin, "build", "-o", out, "./cmd/cordon")
}

// BenchmarkEventRate: a process opening /dev/null at a given rate (0: as fast as it
// can) for 2 s; reports the events per second handled and the events lost.
func BenchmarkEventRate(b *testing.B) {
	requireBPF(b)
	exe, _ := os.Executable()
	for _, rate := range []int{50000, 0} {
		name := "max"
		if rate > 0 {
			name = strconv.Itoa(rate)
		}
		b.Run(name, func(b *testing.B) {
			h := newHarnessHooks(b, hostProfile(), Options{ringSize: 1 << 22}, false)
			n := 100000
			if rate == 0 {
				n = 400000
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				cmd := h.command(append(os.Environ(), helperEnv+"=rate"), exe, strconv.Itoa(n), strconv.Itoa(rate))
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
			h.m.drain()
			elapsed := time.Since(start)
			b.StopTimer()
			s := h.m.Stats()
			b.ReportMetric(float64(s.Events)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(s.Lost), "lost")
			b.ReportMetric(float64(s.Lost)/float64(s.Events+s.Lost)*100, "%lost")
		})
	}
}

// BenchmarkStartClose: one run's start and end once the programs are pinned (the cost
// each monitored run pays; the first run on a host also loads and attaches).
func BenchmarkStartClose(b *testing.B) {
	requireBPF(b)
	h := newHarnessHooks(b, hostProfile(), Options{}, false) // loads the programs
	h.m.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := Start(context.Background(), Options{CgroupID: h.cg.ID, Nested: true})
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}
