package ctlmux

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
)

// A command that leaves a large stdin unread stalls its stdin only: a signal for it
// (a timeout's kill) still reaches process 1, and another command still runs. Stdin
// was queued per stream: the relay's reader stopped at the unread command's queue, so
// the kill never arrived and the session hung.
func TestStdinUnreadStallsOnlyItself(t *testing.T) {
	sup, hostEnd := pair(t)
	podEnd, initEnd := pair(t)
	h2pR, h2pW := io.Pipe()
	p2hR, p2hW := io.Pipe()
	go func() { _ = Pod(podEnd, h2pR, p2hW); p2hW.Close() }()
	go func() { _ = Host(hostEnd, rwc{p2hR, h2pW}, Listeners{}); h2pR.Close() }()
	// Process 1: exec 1 never reads its stdin and exits at its signal; exec 2 echoes.
	go func() {
		var held []*os.File
		defer func() { ctl.CloseFiles(held) }()
		for {
			m, files, err := initEnd.Recv()
			if err != nil {
				return
			}
			switch {
			case m.Op == ctl.OpExec && m.ID == 1:
				held = append(held, files...)
			case m.Op == ctl.OpExec:
				go func() {
					defer ctl.CloseFiles(files)
					in, _ := io.ReadAll(files[0])
					files[1].Write(in)
					files[1].Close()
					_ = initEnd.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID})
				}()
			case m.Op == ctl.OpSignal:
				_ = initEnd.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Code: 128 + m.Sig})
			}
		}
	}()
	send := func(id uint64, stdin io.Reader) *os.File {
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		errR, errW, _ := os.Pipe()
		err := sup.Send(ctl.Msg{Op: ctl.OpExec, ID: id, Argv: []string{"x"}}, inR, outW, errW)
		ctl.CloseFiles([]*os.File{inR, outW, errW})
		if err != nil {
			t.Fatal(err)
		}
		go func() { io.Copy(inW, stdin); inW.Close() }()
		go func() { io.Copy(io.Discard, errR); errR.Close() }()
		return outR
	}
	out1 := send(1, io.LimitReader(zeroReader{}, 8<<20))
	defer out1.Close()
	time.Sleep(500 * time.Millisecond) // the window and the pipes fill
	exited := make(chan ctl.Msg, 2)
	go func() {
		for {
			m, files, err := sup.Recv()
			ctl.CloseFiles(files)
			if err != nil {
				return
			}
			exited <- m
		}
	}()
	if err := sup.Send(ctl.Msg{Op: ctl.OpSignal, ID: 1, Sig: 9}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-exited:
		if m.ID != 1 || m.Code != 137 {
			t.Fatalf("got %+v, want exec 1's exit at its signal", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the signal for a command with unread stdin never reached process 1")
	}
	out2 := send(2, bytes.NewReader([]byte("next")))
	defer out2.Close()
	select {
	case m := <-exited:
		if m.ID != 2 {
			t.Fatalf("got %+v, want exec 2's exit", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next command never ended")
	}
	if got, _ := io.ReadAll(out2); string(got) != "next" {
		t.Errorf("the next command's stdout: %q, want %q", got, "next")
	}
}

// The pod refuses stdin past an exec's window: the host must wait for credit.
func TestPodRefusesStdinPastWindow(t *testing.T) {
	podEnd, initEnd := pair(t)
	go func() {
		for {
			_, files, err := initEnd.Recv()
			ctl.CloseFiles(files) // holds nothing: stdin is never read
			if err != nil {
				return
			}
		}
	}()
	var stream bytes.Buffer
	msg := []byte(`{"op":"exec","id":1,"argv":["x"]}`)
	stream.Write(append(header(kindMsg, 0, uint32(len(msg))), msg...))
	chunk := make([]byte, maxData)
	// Past the window by more than a pipe holds: what the Pod writes into the
	// command's stdin pipe before the other end is closed (up to its capacity) is
	// rightly given back as credit, and a window's worth more would then fit.
	for sent := 0; sent <= stdinWindow+1<<20; sent += maxData {
		stream.Write(append(header(kindStdin, 1, maxData), chunk...))
	}
	done := make(chan error, 1)
	go func() { done <- Pod(podEnd, &stream, io.Discard) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Pod accepted stdin past the window")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Pod still runs")
	}
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
