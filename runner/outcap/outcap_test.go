package outcap

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// want is what a Stream should report for an output, computed the slow, obvious way.
type want struct {
	kept      []byte
	keptChars int
	chars     int64
	lines     int64
	truncated bool
}

func reference(out []byte, capN int) want {
	var ends []int // byte offset after each character
	for i := 0; i < len(out); {
		_, size := utf8.DecodeRune(out[i:])
		i += size
		ends = append(ends, i)
	}
	w := want{chars: int64(len(ends)), lines: int64(bytes.Count(out, []byte{'\n'}))}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		w.lines++
	}
	if capN <= 0 || len(ends) <= capN {
		w.kept, w.keptChars = out, len(ends)
		return w
	}
	w.truncated = true
	w.kept, w.keptChars = out[:ends[capN-1]], capN
	for k := capN; k >= 1 && k >= capN-capN/5; k-- {
		if out[ends[k-1]-1] == '\n' {
			w.kept, w.keptChars = out[:ends[k-1]], k
			break
		}
	}
	return w
}

// capture writes out to a new Stream in the given pieces and closes it.
func capture(t testing.TB, o Options, out []byte, pieces []int) (Result, error) {
	t.Helper()
	s := New(o)
	rest := out
	for _, n := range pieces {
		n = min(n, len(rest))
		if m, err := s.Write(rest[:n]); m != n || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", m, err, n)
		}
		rest = rest[n:]
	}
	if len(rest) > 0 {
		if _, err := s.Write(rest); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	return s.Close()
}

// check compares r, the spill file and the forwarded bytes with the reference.
func check(t *testing.T, o Options, out []byte, r Result, fwd []byte) {
	t.Helper()
	w := reference(out, o.Cap)
	if r.Truncated != w.truncated || r.Total != int64(len(out)) || r.Chars != w.chars || r.Lines != w.lines {
		t.Fatalf("got Truncated %v, Total %d, Chars %d, Lines %d; want %v, %d, %d, %d",
			r.Truncated, r.Total, r.Chars, r.Lines, w.truncated, len(out), w.chars, w.lines)
	}
	if r.Cut != w.chars-int64(w.keptChars) {
		t.Errorf("got Cut %d; want %d", r.Cut, w.chars-int64(w.keptChars))
	}
	if fwd != nil && !bytes.Equal(fwd, w.kept) {
		t.Errorf("forwarded %q; want %q", fwd, w.kept)
	}
	spill, err := os.ReadFile(o.HostPath)
	if !w.truncated {
		if r.Text != string(out) || r.Notice != "" || r.SpillPath != "" {
			t.Errorf("got Text %q, Notice %q, SpillPath %q; want %q, \"\", \"\"", r.Text, r.Notice, r.SpillPath, out)
		}
		if o.HostPath != "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("spill file exists (%v) for an output under the cap", err)
		}
		return
	}
	shown := string(w.kept)
	if !strings.HasSuffix(shown, "\n") {
		shown += "\n"
	}
	if r.Text != shown+r.Notice {
		t.Errorf("got Text %q; want %q + notice %q", r.Text, shown, r.Notice)
	}
	if r.SpillPath != o.ShownPath {
		t.Errorf("got SpillPath %q; want %q", r.SpillPath, o.ShownPath)
	}
	if err != nil || !bytes.Equal(spill, out) {
		t.Errorf("spill file (%v) differs from the output: %d bytes; want %d", err, len(spill), len(out))
	}
	notice := fmt.Sprintf("[cordon: output cut at %d of %d characters (%d more, %d lines in all); whole output: %s — page it with head, tail or grep]\n",
		w.keptChars, w.chars, r.Cut, w.lines, o.ShownPath)
	if r.Notice != notice {
		t.Errorf("got Notice %q; want %q", r.Notice, notice)
	}
}

func spillOptions(t testing.TB, capN int) Options {
	return Options{
		Cap:       capN,
		HostPath:  filepath.Join(t.TempDir(), "14.stdout"),
		ShownPath: "/run/cordon/spill/14.stdout",
	}
}

func TestLongOutput(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 50000; i++ {
		fmt.Fprintf(&b, "line %d %s\n", i, strings.Repeat("x", i%70))
	}
	out := []byte(b.String()[:50000])
	o := spillOptions(t, 10000)
	r, err := capture(t, o, out, []int{4096, 4096, 1, 30000})
	if err != nil {
		t.Fatal(err)
	}
	check(t, o, out, r, nil)
	if !r.Truncated || r.Chars != 50000 || r.Cut < 40000 || r.Cut > 42000 {
		t.Errorf("got Truncated %v, Chars %d, Cut %d", r.Truncated, r.Chars, r.Cut)
	}
	if n := utf8.RuneCountInString(strings.TrimSuffix(r.Text, r.Notice)); n > 10000 {
		t.Errorf("shown %d characters; want at most 10000", n)
	}
	if !strings.HasSuffix(strings.TrimSuffix(r.Text, r.Notice), "\n") {
		t.Errorf("shown part does not end on a whole line: %q", r.Text[len(r.Text)-len(r.Notice)-20:])
	}
	fi, err := os.Stat(o.HostPath)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("spill file: %v, %v; want mode 0644", fi, err)
	}
}

func TestShortOutput(t *testing.T) {
	for _, out := range []string{"", "hello\n", "no newline", strings.Repeat("é", 100)} {
		o := spillOptions(t, 100)
		r, err := capture(t, o, []byte(out), []int{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		check(t, o, []byte(out), r, nil)
	}
}

func TestMultiByte(t *testing.T) {
	tests := []struct {
		name string
		out  string
		cap  int
	}{
		{"é straddles", "abcé" + strings.Repeat("z", 20), 4},
		{"漢 straddles", "ab漢漢漢" + strings.Repeat("z", 20), 3},
		{"🙂 straddles", "a🙂🙂🙂" + strings.Repeat("z", 20), 2},
		{"🙂 last kept", "a🙂🙂", 2},
		{"🙂 exactly at cap", "a🙂", 2},
		{"mixed", "é漢🙂\n" + strings.Repeat("é漢🙂", 10), 7},
		{"invalid bytes", "a\xff\xfe\xe6\xbcb\xf0\x9f" + strings.Repeat("c", 10), 4},
		{"incomplete at end over cap", "abc\xf0\x9f\x99", 4},
		{"incomplete at end under cap", "abc\xf0\x9f\x99", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := []byte(tt.out)
			// Every split point of a two-piece write, and one byte at a time.
			for split := 0; split <= len(out); split++ {
				o := spillOptions(t, tt.cap)
				var fwd bytes.Buffer
				o.Forward = &fwd
				r, err := capture(t, o, out, []int{split})
				if err != nil {
					t.Fatal(err)
				}
				check(t, o, out, r, fwd.Bytes())
			}
			o := spillOptions(t, tt.cap)
			r, err := capture(t, o, out, ones(len(out)))
			if err != nil {
				t.Fatal(err)
			}
			check(t, o, out, r, nil)
		})
	}
}

func ones(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 1
	}
	return p
}

func TestCutOnNewline(t *testing.T) {
	tests := []struct {
		name, out, shown string
		cap              int
	}{
		{"newline in final 20%", "0123456\n89abcdef\n", "0123456\n", 10},
		{"last newline wins", "01234567\n\nabc", "01234567\n\n", 10},
		{"newline too early", "012345\n789abcdef", "012345\n789\n", 10},
		{"no newline", "0123456789abcdef", "0123456789\n", 10},
		{"newline is the cap-th", "012345678\nabc", "012345678\n", 10},
		{"newline just past cap", "0123456789\n", "0123456789\n", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := spillOptions(t, tt.cap)
			r, err := capture(t, o, []byte(tt.out), nil)
			if err != nil {
				t.Fatal(err)
			}
			check(t, o, []byte(tt.out), r, nil)
			if got := strings.TrimSuffix(r.Text, r.Notice); got != tt.shown {
				t.Errorf("shown %q; want %q", got, tt.shown)
			}
		})
	}
}

func TestForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		out := randomOutput(rng, rng.IntN(300))
		capN := rng.IntN(120) + 1
		o := spillOptions(t, capN)
		var fwd bytes.Buffer
		o.Forward = &fwd
		r, err := capture(t, o, out, randomPieces(rng, len(out)))
		if err != nil {
			t.Fatal(err)
		}
		check(t, o, out, r, fwd.Bytes())
	}
}

// TestForwardLive checks that a kept line reaches Forward before Close.
func TestForwardLive(t *testing.T) {
	var fwd bytes.Buffer
	s := New(Options{Cap: 100, Forward: &fwd})
	s.Write([]byte("first line\nsecond"))
	if got := fwd.String(); got != "first line\nsecond" {
		t.Errorf("forwarded %q before Close", got)
	}
	s.Write([]byte(strings.Repeat("x", 200)))
	r, _ := s.Close()
	if got := strings.TrimSuffix(r.Text, "\n"+r.Notice); fwd.String() != got {
		t.Errorf("forwarded %q; want %q", fwd.String(), got)
	}
}

func TestForwardError(t *testing.T) {
	o := spillOptions(t, 10)
	o.Forward = failWriter{}
	out := []byte(strings.Repeat("a", 30))
	r, err := capture(t, o, out, nil)
	if err == nil {
		t.Error("Close returned no error for a failing Forward")
	}
	check(t, o, out, r, nil)
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestRandomAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		out := randomOutput(rng, rng.IntN(2000))
		capN := rng.IntN(300) - 10
		o := spillOptions(t, capN)
		r, err := capture(t, o, out, randomPieces(rng, len(out)))
		if err != nil {
			t.Fatal(err)
		}
		check(t, o, out, r, nil)
	}
}

func FuzzStream(f *testing.F) {
	f.Add([]byte("héllo\nwörld 漢🙂\n"), 5, 3)
	f.Add([]byte("a\xf0\x9f\x99"), 2, 1)
	f.Fuzz(func(t *testing.T, out []byte, capN, piece int) {
		capN %= 1000
		o := spillOptions(t, capN)
		var fwd bytes.Buffer
		o.Forward = &fwd
		pieces := []int{}
		if piece > 0 {
			for n := 0; n < len(out); n += piece {
				pieces = append(pieces, piece)
			}
		}
		r, err := capture(t, o, out, pieces)
		if err != nil {
			t.Fatal(err)
		}
		check(t, o, out, r, fwd.Bytes())
	})
}

// randomOutput mixes ASCII, newlines, multi-byte characters and invalid bytes.
func randomOutput(rng *rand.Rand, n int) []byte {
	parts := []string{"a", "b", " ", "\n", "\n", "é", "漢", "🙂", "\xff", "\xf0\x9f", "\xe6", "\x80"}
	var b []byte
	for len(b) < n {
		b = append(b, parts[rng.IntN(len(parts))]...)
	}
	return b
}

func randomPieces(rng *rand.Rand, n int) []int {
	var p []int
	for n > 0 {
		k := rng.IntN(min(n, 40)) + 1
		p = append(p, k)
		n -= k
	}
	return p
}

func TestMaxSpill(t *testing.T) {
	o := spillOptions(t, 10)
	o.MaxSpill = 100
	out := []byte(strings.Repeat("0123456789", 25)) // 250 bytes, no newline
	r, err := capture(t, o, out, []int{7, 93, 1, 50})
	if err != nil {
		t.Fatal(err)
	}
	spill, err := os.ReadFile(o.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	wantSpill := string(out[:100]) + "\n[cordon: spill file cut at 100 bytes; 150 more bytes dropped]\n"
	if string(spill) != wantSpill {
		t.Errorf("spill file %q; want %q", spill, wantSpill)
	}
	wantNotice := "[cordon: output cut at 10 of 250 characters (240 more, 1 lines in all); first 100 of 250 bytes: /run/cordon/spill/14.stdout — page it with head, tail or grep]\n"
	if r.Notice != wantNotice || r.Text != "0123456789\n"+wantNotice {
		t.Errorf("got Text %q; want notice %q", r.Text, wantNotice)
	}
}

// TestHugeCapHoldsMaxCap: a cap far above MaxCap keeps MaxCap characters, as a cap
// of MaxCap would, and holds no more than about 4×MaxCap bytes of the output.
func TestHugeCapHoldsMaxCap(t *testing.T) {
	o := spillOptions(t, 1<<40)
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	s := New(o)
	const total = 6 * MaxCap
	for range total / len(chunk) {
		if _, err := s.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if held := cap(s.head); held > 4*MaxCap+len(chunk) {
		t.Errorf("holds %d bytes of the output; want at most about 4×MaxCap (%d)", held, 4*MaxCap)
	}
	r, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || r.Cut != total-MaxCap || r.Chars != total {
		t.Errorf("got Truncated %v, Chars %d, Cut %d; want cut at %d of %d", r.Truncated, r.Chars, r.Cut, MaxCap, total)
	}
}

func TestSpillNotWritable(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{filepath.Join(dir, "missing", "1.stdout"), filepath.Join(notDir, "1.stdout")} {
		var fwd bytes.Buffer
		o := Options{Cap: 10, HostPath: host, ShownPath: "/run/cordon/spill/1.stdout", Forward: &fwd}
		out := []byte("0123456789abcdef\n")
		r, err := capture(t, o, out, []int{3, 3})
		if err == nil {
			t.Errorf("%s: Close returned no error", host)
		}
		wantNotice := "[cordon: output cut at 10 of 17 characters (7 more, 1 lines in all); the rest was not saved]\n"
		if !r.Truncated || r.SpillPath != "" || r.Notice != wantNotice || r.Text != "0123456789\n"+wantNotice {
			t.Errorf("%s: got %+v", host, r)
		}
		if fwd.String() != "0123456789" {
			t.Errorf("forwarded %q", fwd.String())
		}
	}
}

func TestNoSpillPath(t *testing.T) {
	r, err := capture(t, Options{Cap: 3}, []byte("abcdef"), nil)
	if err != nil || r.SpillPath != "" || !strings.HasSuffix(r.Notice, "the rest was not saved]\n") {
		t.Errorf("got %+v, %v", r, err)
	}
}

// TestSymlinkNotFollowed checks that a link planted at HostPath is replaced, not
// written through.
func TestSymlinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := spillOptions(t, 3)
	if err := os.Symlink(target, o.HostPath); err != nil {
		t.Fatal(err)
	}
	out := []byte("abcdefgh")
	r, err := capture(t, o, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(t, o, out, r, nil)
	if got, _ := os.ReadFile(target); string(got) != "keep me" {
		t.Errorf("symlink target now holds %q", got)
	}
	if fi, err := os.Lstat(o.HostPath); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("spill file is %v, %v; want a regular file", fi, err)
	}
}

func TestNoCap(t *testing.T) {
	for _, capN := range []int{0, -1} {
		o := spillOptions(t, capN)
		var fwd bytes.Buffer
		o.Forward = &fwd
		out := []byte(strings.Repeat("é漢🙂\n", 10000))
		r, err := capture(t, o, out, []int{1, 1000, 5})
		if err != nil {
			t.Fatal(err)
		}
		check(t, o, out, r, fwd.Bytes())
	}
}

func TestClose(t *testing.T) {
	s := New(Options{Cap: 2})
	s.Write([]byte("abc"))
	r1, err1 := s.Close()
	r2, err2 := s.Close()
	if r1 != r2 || err1 != err2 {
		t.Errorf("second Close = %+v, %v; want %+v, %v", r2, err2, r1, err1)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v; want ErrClosed", err)
	}
}

// TestCloseFromAnotherGoroutine is for -race: the writer runs in its own goroutine, and
// Close is called once it has finished.
func TestCloseFromAnotherGoroutine(t *testing.T) {
	o := spillOptions(t, 100)
	s := New(o)
	out := []byte(strings.Repeat("line\n", 1000))
	var wg sync.WaitGroup
	wg.Go(func() {
		for p := out; len(p) > 0; p = p[min(len(p), 77):] {
			s.Write(p[:min(len(p), 77)])
		}
	})
	wg.Wait()
	r, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	check(t, o, out, r, nil)
}

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	for _, p := range []string{filepath.Join(dir, "1.stdout"), filepath.Join(dir, "1.stderr"), target} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "2.stdout"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "dirlink")); err != nil {
		t.Fatal(err)
	}
	n, err := Sweep(dir)
	if n != 2 || err != nil {
		t.Errorf("Sweep = %d, %v; want 2, nil", n, err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if got := strings.Join(left, " "); got != "dirlink link sub" {
		t.Errorf("left %q; want \"dirlink link sub\"", got)
	}
	for _, p := range []string{target, filepath.Join(dir, "sub", "2.stdout")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Sweep removed %s: %v", p, err)
		}
	}
	if n, err := Sweep(filepath.Join(dir, "missing")); n != 0 || err != nil {
		t.Errorf("Sweep(missing) = %d, %v; want 0, nil", n, err)
	}
}

func BenchmarkStream(b *testing.B) {
	const size, piece = 64 << 20, 32 << 10
	chunk := []byte(strings.Repeat("some build output, line after line: é漢🙂 ok\n", piece/48+1)[:piece])
	o := spillOptions(b, 10000)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		s := New(o)
		for n := 0; n < size; n += piece {
			s.Write(chunk)
		}
		if r, err := s.Close(); err != nil || r.Total != size {
			b.Fatalf("Close = %d bytes, %v", r.Total, err)
		}
	}
}

func TestCountRunes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		p := randomOutput(rng, rng.IntN(500))
		if rng.IntN(2) == 0 {
			p = append(bytes.Repeat([]byte("ascii..."), rng.IntN(10)), p...)
		}
		if got, want := countRunes(p), int64(utf8.RuneCount(p)); got != want {
			t.Fatalf("countRunes(%q) = %d; want %d", p, got, want)
		}
	}
}
