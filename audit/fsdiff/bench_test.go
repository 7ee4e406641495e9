package fsdiff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	benchFiles = 10_000
	benchBytes = 100 << 20
)

// genWorkspace writes files text files totalling about size bytes, 100 per directory,
// and returns their paths.
func genWorkspace(b *testing.B, files, size int) (string, []string) {
	b.Helper()
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("func return if else for range package import type struct " +
		"var const nil err string int byte map chan go defer select case default")
	per := size / files
	paths := make([]string, files)
	var sb strings.Builder
	for i := range files {
		sb.Reset()
		for sb.Len() < per {
			for range 8 {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%d\n", rng.IntN(1_000_000))
		}
		p := filepath.Join(dir, fmt.Sprintf("pkg%03d", i/100), fmt.Sprintf("file%05d.go", i))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		paths[i] = p
	}
	return dir, paths
}

// BenchmarkBaseline measures the one-off snapshot that reads and hashes everything.
func BenchmarkBaseline(b *testing.B) {
	dir, _ := genWorkspace(b, benchFiles, benchBytes)
	b.SetBytes(benchBytes)
	for b.Loop() {
		if _, err := New(context.Background(), dir, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiff measures one per-command check: a snapshot against the previous one and
// the patch of what changed, with 0, 10 and 1,000 files edited between checks.
func BenchmarkDiff(b *testing.B) {
	dir, paths := genWorkspace(b, benchFiles, benchBytes)
	for _, changed := range []int{0, 10, 1000} {
		b.Run(fmt.Sprintf("files=%d/changed=%d", benchFiles, changed), func(b *testing.B) {
			tr, err := New(context.Background(), dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tr.Diff(context.Background()); err != nil { // settle racy entries
				b.Fatal(err)
			}
			next := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for range changed {
					appendLine(b, paths[next%len(paths)], i)
					next += 97 // spread over directories
				}
				b.StartTimer()
				res, err := tr.Diff(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Changes) != changed {
					b.Fatalf("got %d changes; want %d", len(res.Changes), changed)
				}
			}
		})
	}
}

func appendLine(b *testing.B, p string, i int) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(f, "// edit %d\n", i)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// gitWorkspace is genWorkspace committed to a git repository, as a checkout is: the
// baseline then reads the index instead of the files.
func gitWorkspace(b *testing.B, files, size int) string {
	b.Helper()
	dir, _ := genWorkspace(b, files, size)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "bench"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@localhost",
			"-c", "core.hooksPath=/dev/null", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Skipf("git %v: %v: %s", args, err, out)
		}
	}
	time.Sleep(racyWindow) // past the racy window: the index vouches for every file
	return dir
}

// BenchmarkGitBaseline and BenchmarkGitDiff measure a direct run's two walks of a
// git checkout with nothing changed (issue 39): a stat walk and the index, then a
// stat walk against the baseline.
func BenchmarkGitBaseline(b *testing.B) {
	dir := gitWorkspace(b, benchFiles, benchFiles*1000)
	b.ReportAllocs()
	for b.Loop() {
		tr, err := New(context.Background(), dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if tr.Baseline().Read != 0 {
			b.Fatalf("the baseline read %d files; want none", tr.Baseline().Read)
		}
	}
}

func BenchmarkGitDiff(b *testing.B) {
	dir := gitWorkspace(b, benchFiles, benchFiles*1000)
	tr, err := New(context.Background(), dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := tr.Diff(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Changes) != 0 {
			b.Fatalf("%d changes; want none", len(res.Changes))
		}
	}
}

// BenchmarkSessionWatched measures a session command's fork and diff from a watch's
// report of one changed file in a 10,000-file workspace: what they cost beyond what
// changed.
func BenchmarkSessionWatched(b *testing.B) {
	dir, paths := genWorkspace(b, benchFiles, 10<<20)
	ctx := context.Background()
	t, err := New(ctx, dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * racyWindow)             // nothing racy: the report alone says what to read
	if _, err := t.Diff(ctx); err != nil { // re-reads what was racy
		b.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, paths[len(paths)/2])
	w := Watched{Paths: []ChangedPath{{Path: filepath.ToSlash(rel)}}}
	for b.Loop() {
		fork, _, why, err := t.ForkWatched(ctx, w)
		if err != nil || why != "" {
			b.Fatal(why, err)
		}
		if _, why, err := fork.DiffWatched(ctx, w); err != nil || why != "" {
			b.Fatal(why, err)
		}
		t.Adopt(fork)
	}
}
