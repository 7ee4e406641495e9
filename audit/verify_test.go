package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit/fsdiff"
)

// splitLog returns the lines of a log, each with its newline.
func splitLog(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	return lines[:len(lines)-1]
}

func writeLog(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rehash recomputes the hash of a line after an edit, as a careful forger would.
func rehash(line []byte) []byte {
	l := bytes.TrimSuffix(line, []byte("\n"))
	canon := append(append([]byte{}, l[:len(l)-2-hashHexLen]...), `"}`...)
	sum := sha256.Sum256(canon)
	return append(append(canon[:len(canon)-2], hex.EncodeToString(sum[:])...), "\"}\n"...)
}

func TestVerifyDetectsTampering(t *testing.T) {
	// The sample log: 1 run.start, 2 cmd.start, 3 net.allow, 4 net.deny, 5 cmd.end, 6 run.end.
	tests := []struct {
		name   string
		tamper func(lines [][]byte) [][]byte
		line   int
		want   error
	}{
		{"intact", func(l [][]byte) [][]byte { return l }, 0, nil},
		{"edit a body byte", func(l [][]byte) [][]byte {
			l[3] = bytes.Replace(l[3], []byte("evil.example"), []byte("evil.exampl3"), 1)
			return l
		}, 4, ErrEdited},
		{"edit the hash", func(l [][]byte) [][]byte {
			l[2] = bytes.Replace(l[2], []byte(`"hash":"`), []byte(`"hash":"0`), 1)
			l[2] = append(l[2][:len(l[2])-4], "\"}\n"...)
			return l
		}, 3, ErrEdited},
		{"edit and rehash", func(l [][]byte) [][]byte {
			l[3] = rehash(bytes.Replace(l[3], []byte("evil"), []byte("good"), 1))
			return l
		}, 5, ErrReordered},
		{"delete a line", func(l [][]byte) [][]byte { return append(l[:2], l[3:]...) }, 3, ErrMissing},
		{"swap two lines", func(l [][]byte) [][]byte {
			l[2], l[3] = l[3], l[2]
			return l
		}, 3, ErrReordered},
		{"duplicate a line", func(l [][]byte) [][]byte {
			return append(l[:4], append([][]byte{l[3]}, l[4:]...)...)
		}, 5, ErrReordered},
		{"truncate mid-line", func(l [][]byte) [][]byte {
			l[5] = l[5][:len(l[5])/2]
			return l
		}, 6, ErrTruncated},
		{"drop the seal", func(l [][]byte) [][]byte { return l[:5] }, 6, ErrTruncated},
		{"empty", func(l [][]byte) [][]byte { return nil }, 1, ErrTruncated},
		{"line after the seal", func(l [][]byte) [][]byte {
			extra := bytes.Replace(l[4], []byte(`"seq":5`), []byte(`"seq":7`), 1)
			extra = bytes.Replace(extra, []byte(prevOf(extra)), []byte(hashOf(l[5])), 1)
			return append(l, rehash(extra))
		}, 7, ErrMalformed},
		{"not canonical", func(l [][]byte) [][]byte {
			l[2] = rehash(bytes.Replace(l[2], []byte(`{"v":1,`), []byte(`{"v":1, `), 1))
			return l
		}, 3, ErrMalformed},
		{"future version", func(l [][]byte) [][]byte {
			l[0] = rehash(bytes.Replace(l[0], []byte(`{"v":1,`), []byte(`{"v":2,`), 1))
			return l
		}, 1, ErrUnsupportedVersion},
		{"garbage", func(l [][]byte) [][]byte {
			l[1] = []byte("hello\n")
			return l
		}, 2, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeSampleRun(t)
			writeLog(t, path, tt.tamper(splitLog(t, path)))
			rep, err := Verify(path)
			if tt.want == nil {
				if err != nil || !rep.OK() || rep.Lines != 6 {
					t.Fatalf("Verify = %+v, %v; want intact", rep, err)
				}
				return
			}
			var ve *VerifyError
			if !errors.Is(err, tt.want) || !errors.As(err, &ve) || ve.Line != tt.line {
				t.Fatalf("Verify = %v; want %v at line %d", err, tt.want, tt.line)
			}
			if rep.OK() || rep.Problem != ve || rep.Lines != tt.line-1 {
				t.Errorf("report %+v: want problem set and %d intact lines", rep, tt.line-1)
			}
		})
	}
}

func TestVerifyPatchFiles(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(path string) error
		want   error
	}{
		{"intact", func(string) error { return nil }, nil},
		{"edited", func(p string) error { return os.WriteFile(p, []byte("other\n"), 0o600) }, ErrEdited},
		{"removed", os.Remove, ErrMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _ := newWriter(t, Options{MaxInlinePatch: 16})
			cmd, _ := w.StartCmd(CmdStart{Argv: []string{"true"}})
			res := &fsdiff.Result{Patch: []byte("diff --git a/x b/x\n+line one\n+line two\n")}
			if err := w.RecordDiff(cmd, res, nil); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(RunEnd{}); err != nil {
				t.Fatal(err)
			}
			patch := filepath.Join(w.Dir(), "fsdiff-0001.patch")
			if err := tt.tamper(patch); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(w.Path())
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Verify: %v; want %v", err, tt.want)
			}
		})
	}
}

// TestVerifyHeadAnchor shows what the chain alone cannot catch (a log rewritten from
// line 1 with recomputed hashes) and how the head recorded at Close catches it.
func TestVerifyHeadAnchor(t *testing.T) {
	path := writeSampleRun(t)
	orig, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := splitLog(t, path)
	prev := ""
	for i, l := range lines {
		if i == 3 {
			l = bytes.Replace(l, []byte("evil"), []byte("good"), 1)
		}
		l = bytes.Replace(l, []byte(`"prev":"`+prevOf(l)+`"`), []byte(`"prev":"`+prev+`"`), 1)
		lines[i] = rehash(l)
		prev = string(lines[i][len(lines[i])-3-hashHexLen : len(lines[i])-3])
	}
	writeLog(t, path, lines)
	forged, err := Verify(path)
	if err != nil {
		t.Fatalf("a fully re-hashed log verifies on its own: got %v", err)
	}
	if forged.Head == orig.Head {
		t.Error("forged log has the original head")
	}
}

func prevOf(line []byte) string {
	i := bytes.Index(line, []byte(`,"prev":"`)) + len(`,"prev":"`)
	j := bytes.IndexByte(line[i:], '"')
	return string(line[i : i+j])
}

func TestVerifyMovedLog(t *testing.T) {
	path := writeSampleRun(t)
	other := filepath.Join(t.TempDir(), "20270101T000000Z-000000")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	lines := splitLog(t, path)
	// A line spliced in from another run (same position, valid hash) is caught.
	lines[2] = rehash(bytes.Replace(lines[2], []byte(testRun), []byte("20270101T000000Z-000000"), 1))
	writeLog(t, filepath.Join(other, EventsFile), lines)
	_, err := Verify(filepath.Join(other, EventsFile))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("Verify: %v; want malformed at line 3", err)
	}
}

func hashOf(line []byte) string { return string(line[len(line)-3-hashHexLen : len(line)-3]) }
