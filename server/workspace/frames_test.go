package workspace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestFramedPacks: packs follow one another on one stream, each whole, a packer's
// failure and a sink's are the pack's error with the stream still in step, and a
// stream that breaks the format or ends mid-pack is refused and not to be read on.
func TestFramedPacks(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), MaxFrame/8+3) // past two frames
	var stream bytes.Buffer
	for _, p := range []func(io.Writer) error{
		func(w io.Writer) error { _, err := w.Write(big); return err },
		func(w io.Writer) error { w.Write([]byte("half")); return errors.New("a file changed as it was read") },
		func(w io.Writer) error { _, err := w.Write([]byte("small")); return err },
		func(w io.Writer) error { _, err := w.Write([]byte("to a failing sink")); return err },
		func(io.Writer) error { return errors.New(strings.Repeat("x", 2*MaxFrameError)) },
	} {
		if err := WriteFramed(&stream, p); err != nil {
			t.Fatal(err)
		}
	}
	r := bytes.NewReader(stream.Bytes())
	var got bytes.Buffer
	if ok, err := ReadFramed(r, &got); err != nil || !ok || !bytes.Equal(got.Bytes(), big) {
		t.Fatalf("a pack of %d bytes: %d back, %v %v", len(big), got.Len(), err, ok)
	}
	got.Reset()
	if ok, err := ReadFramed(r, &got); err == nil || !ok || !strings.Contains(err.Error(), "changed as it was read") {
		t.Fatalf("a failed pack: %v %v, want its error and the stream kept", err, ok)
	}
	got.Reset()
	if ok, err := ReadFramed(r, &got); err != nil || !ok || got.String() != "small" {
		t.Fatalf("the pack after a failed one: %q %v %v", got.String(), err, ok)
	}
	sinkErr := errors.New("the sync stopped reading")
	if ok, err := ReadFramed(r, failing{sinkErr}); !errors.Is(err, sinkErr) || !ok {
		t.Fatalf("a failing sink: %v %v, want its error and the stream kept", err, ok)
	}
	if ok, err := ReadFramed(r, io.Discard); err == nil || !ok || len(err.Error()) > MaxFrameError+50 {
		t.Fatalf("a long error: %d bytes, %v", len(err.Error()), ok)
	}
	if ok, err := ReadFramed(r, io.Discard); !errors.Is(err, ErrFrames) || ok {
		t.Fatalf("the stream's end: %v %v, want ErrFrames and no more", err, ok)
	}

	frame := func(n uint32, data string) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		return append(b, data...)
	}
	for name, bad := range map[string][]byte{
		"a frame past the bound":    frame(MaxFrame+1, ""),
		"an outcome past the bound": append(frame(0, ""), frame(MaxFrameError+1, "")...),
		"cut mid-frame":             frame(10, "abc"),
		"cut before the outcome":    frame(3, "abc"),
		"cut mid-outcome":           append(frame(0, ""), frame(5, "ab")...),
	} {
		if ok, err := ReadFramed(bytes.NewReader(bad), io.Discard); !errors.Is(err, ErrFrames) || ok {
			t.Errorf("%s: %v %v, want ErrFrames and no more", name, err, ok)
		}
	}
}

type failing struct{ err error }

func (f failing) Write([]byte) (int, error) { return 0, f.err }
