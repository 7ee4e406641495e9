package runner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
)

// TestControlSocketClosedBeforeReady: once process 1's hello is taken, the control
// socket refuses every other connect by the time process 1 has its ready, which is
// when a command can start: a command's connect is refused, never queued unanswered.
func TestControlSocketClosedBeforeReady(t *testing.T) {
	for i := 0; i < 20; i++ {
		path := filepath.Join(shortDir(t), "c.sock")
		ln, err := listenControl(path)
		if err != nil {
			t.Fatal(err)
		}
		token := newToken()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		done := make(chan *control, 1)
		go func() {
			cc, err := acceptControl(ctx, ln, token, nil, func(fs []*os.File) error { ctl.CloseFiles(fs); return nil })
			if err != nil {
				t.Error(err)
			}
			done <- cc
		}()
		pc, err := ctl.Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pc.Send(ctl.Msg{Op: ctl.OpHello, Token: token}); err != nil {
			t.Fatal(err)
		}
		if m, fs, err := pc.Recv(); err != nil || m.Op != ctl.OpReady {
			ctl.CloseFiles(fs)
			t.Fatalf("process 1 got %+v, %v; want its ready", m, err)
		}
		// What a command would do first thing after process 1 has its ready.
		if c, err := ctl.Dial(path); err == nil {
			c.Close()
			t.Fatalf("attempt %d: a connect after the ready reached the control socket", i)
		}
		if cc := <-done; cc != nil {
			cc.close()
		}
		pc.Close()
		cancel()
	}
}
