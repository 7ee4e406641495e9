package ctlmux

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
)

func pair(t *testing.T) (*ctl.Conn, *ctl.Conn) {
	t.Helper()
	a, b, err := linux.SeqpacketPair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return ctl.New(a), ctl.New(b)
}

type rwc struct {
	io.Reader
	w *io.PipeWriter
}

func (s rwc) Write(b []byte) (int, error) { return s.w.Write(b) }
func (s rwc) Close() error                { return s.w.Close() }

// fakeInit answers each exec as process 1 would: it echoes the command's stdin to
// its stdout after argv[0], writes argv[1] to its stderr, and exits with len(stdin).
func fakeInit(c *ctl.Conn) {
	for {
		m, files, err := c.Recv()
		if err != nil {
			return
		}
		if m.Op != ctl.OpExec || len(files) != 3 {
			ctl.CloseFiles(files)
			continue
		}
		go func() {
			defer ctl.CloseFiles(files)
			in, _ := io.ReadAll(files[0])
			fmt.Fprintf(files[1], "%s:%s", m.Argv[0], in)
			io.WriteString(files[2], m.Argv[1])
			files[1].Close()
			files[2].Close()
			_ = c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Code: len(in)})
		}()
	}
}

// relay wires a supervisor's connection to a fake process 1 through Host, a stream
// and Pod, and returns the supervisor's end.
func relay(t *testing.T) *ctl.Conn {
	t.Helper()
	sup, hostEnd := pair(t)
	podEnd, initEnd := pair(t)
	h2pR, h2pW := io.Pipe()
	p2hR, p2hW := io.Pipe()
	go fakeInit(initEnd)
	go func() { _ = Pod(podEnd, h2pR, p2hW); p2hW.Close() }()
	go func() { _ = Host(hostEnd, rwc{p2hR, h2pW}, Listeners{}); h2pR.Close() }()
	return sup
}

type result struct {
	code           int
	stdout, stderr string
}

// execs sends one exec per stdin, all at once, and collects their results.
func execs(t *testing.T, sup *ctl.Conn, stdins []string) map[uint64]result {
	t.Helper()
	var wg sync.WaitGroup
	outs := make([][2]bytes.Buffer, len(stdins))
	for i, stdin := range stdins {
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		errR, errW, _ := os.Pipe()
		err := sup.Send(ctl.Msg{Op: ctl.OpExec, ID: uint64(i + 1), Argv: []string{"cmd", fmt.Sprint("e", i)}}, inR, outW, errW)
		ctl.CloseFiles([]*os.File{inR, outW, errW})
		if err != nil {
			t.Fatal(err)
		}
		go func() { io.WriteString(inW, stdin); inW.Close() }()
		wg.Add(2)
		go func() { defer wg.Done(); io.Copy(&outs[i][0], outR); outR.Close() }()
		go func() { defer wg.Done(); io.Copy(&outs[i][1], errR); errR.Close() }()
	}
	got := map[uint64]result{}
	for range stdins {
		m, files, err := sup.Recv()
		ctl.CloseFiles(files)
		if err != nil || m.Op != ctl.OpExit {
			t.Fatalf("waiting for exits: %+v %v", m, err)
		}
		got[m.ID] = result{code: m.Code}
	}
	wg.Wait()
	for id, r := range got {
		r.stdout, r.stderr = outs[id-1][0].String(), outs[id-1][1].String()
		got[id] = r
	}
	return got
}

// Commands run through the relay as through process 1's own connection: stdin in,
// stdout and stderr out, each exec's to its own descriptors, their statuses back,
// several at once, stdin larger than a frame.
func TestRelay(t *testing.T) {
	sup := relay(t)
	big := strings.Repeat("x", 3*maxData+17)
	stdins := []string{"hello", "", big, "a\nb\n"}
	got := execs(t, sup, stdins)
	for i, stdin := range stdins {
		r := got[uint64(i+1)]
		if r.code != len(stdin) || r.stdout != "cmd:"+stdin || r.stderr != fmt.Sprint("e", i) {
			t.Errorf("exec %d: status %d, stdout %d bytes, stderr %q; want %d, %d bytes, %q",
				i+1, r.code, len(r.stdout), r.stderr, len(stdin), len("cmd:"+stdin), fmt.Sprint("e", i))
		}
	}
}

// An exec request without its three descriptors is answered with an error, never
// relayed.
func TestRelayMalformedExec(t *testing.T) {
	sup := relay(t)
	if err := sup.Send(ctl.Msg{Op: ctl.OpExec, ID: 9, Argv: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	m, _, err := sup.Recv()
	if err != nil || m.Op != ctl.OpExit || m.ID != 9 || m.Error == "" {
		t.Fatalf("got %+v (%v), want exec 9's exit with an error", m, err)
	}
}

// A hostile stream ends the relay in the pod: unknown kinds, frames past their
// bounds, stdout sent the wrong way. Process 1's connection is closed, so the
// session ends.
func TestPodRefusesBadFrames(t *testing.T) {
	for name, f := range map[string][]byte{
		"unknown kind":  header(9, 1, 0),
		"huge message":  header(kindMsg, 0, ctl.MaxMsg+1),
		"huge data":     header(kindStdin, 1, maxData+1),
		"long end":      header(kindEOF, 1, 2),
		"stdout to pod": append(header(kindEOF, 1, 1), 1),
		"bad end":       append(header(kindEOF, 1, 1), 7),
		"not json":      append(header(kindMsg, 0, 3), "{{{"...),
		"cut short":     append(header(kindMsg, 0, 100), "{}"...),
		"output to pod": append(header(kindStdout, 1, 1), 'x'),
	} {
		t.Run(name, func(t *testing.T) {
			podEnd, initEnd := pair(t)
			done := make(chan error, 1)
			go func() { done <- Pod(podEnd, bytes.NewReader(f), io.Discard) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Pod accepted the frame")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Pod still runs")
			}
			if _, _, err := initEnd.Recv(); err == nil {
				t.Error("process 1's connection is still open")
			}
		})
	}
}

func header(kind byte, id uint64, n uint32) []byte {
	h := make([]byte, headerSize)
	h[0] = kind
	binary.BigEndian.PutUint64(h[1:9], id)
	binary.BigEndian.PutUint32(h[9:13], n)
	return h
}
