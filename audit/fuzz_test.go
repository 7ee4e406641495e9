package audit

import (
	"bytes"
	"os"
	"testing"
)

// FuzzVerify feeds arbitrary logs to the verifier and the reader: they read files an
// attacker may have edited, so they must never panic, and a log the verifier accepts
// must read back whole.
func FuzzVerify(f *testing.F) {
	data, err := os.ReadFile(writeSampleRunF(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte("{}\n"))
	dir := f.TempDir() // holds no patch files
	f.Fuzz(func(t *testing.T, data []byte) {
		var rep Report
		problem := verifyLines(&rep, data, dir)
		var n int
		rerr := eachLine(bytes.NewReader(data), func(_ int, line []byte) error {
			_, err := parseRecord(line)
			n++
			return err
		})
		if problem == nil && (rerr != nil || n != rep.Lines || !rep.Sealed) {
			t.Errorf("verified log reads back as %d records, %v", n, rerr)
		}
	})
}
