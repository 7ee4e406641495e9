package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSealAbandoned(t *testing.T) {
	// The sample log: 1 run.start, 2 cmd.start, 3 net.allow, 4 net.deny, 5 cmd.end, 6 run.end.
	end := RunEnd{ExitCode: 125, Reason: ReasonError, Detail: "its cordon died", Commands: 9, Dropped: 9}
	t.Run("a dead run's log is sealed, once", func(t *testing.T) {
		path := writeSampleRun(t)
		writeLog(t, path, splitLog(t, path)[:5]) // cordon died before its seal
		if _, err := Verify(path); !errors.Is(err, ErrTruncated) {
			t.Fatalf("before: %v; want truncated", err)
		}
		sealed, err := SealAbandoned(filepath.Dir(path), end)
		if err != nil || !sealed {
			t.Fatalf("SealAbandoned = %v, %v; want sealed", sealed, err)
		}
		rep, err := Verify(path)
		if err != nil || !rep.Sealed || rep.Lines != 6 {
			t.Fatalf("after: %+v, %v; want 6 lines, sealed", rep, err)
		}
		lines := splitLog(t, path)
		if last := lines[5]; !bytes.Contains(last, []byte(`"type":"run.end"`)) ||
			!bytes.Contains(last, []byte(`"exit_code":125,"reason":"error","detail":"its cordon died","commands":1,"dropped":0`)) {
			t.Errorf("seal: %s", last)
		}
		if sealed, err := SealAbandoned(filepath.Dir(path), end); sealed || err != nil {
			t.Errorf("again: %v, %v; want nothing done", sealed, err)
		}
		if got := splitLog(t, path); len(got) != 6 {
			t.Errorf("again: %d lines; want 6", len(got))
		}
	})
	for name, tamper := range map[string]func(l [][]byte) [][]byte{
		"a partial last line": func(l [][]byte) [][]byte { return append(l[:4], l[4][:len(l[4])/2]) },
		"a line edited":       func(l [][]byte) [][]byte { l[3] = bytes.Replace(l[3], []byte("evil"), []byte("good"), 1); return l[:5] },
		"a line missing":      func(l [][]byte) [][]byte { return append(l[:2], l[3:5]...) },
	} {
		t.Run(name+" is never extended", func(t *testing.T) {
			path := writeSampleRun(t)
			writeLog(t, path, tamper(splitLog(t, path)))
			before, _ := os.ReadFile(path)
			if sealed, err := SealAbandoned(filepath.Dir(path), end); sealed || err == nil {
				t.Fatalf("SealAbandoned = %v, %v; want an error", sealed, err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("the log was changed")
			}
		})
	}
}
