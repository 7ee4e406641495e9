package bwrap

import (
	"io"
	"os"
	"sync"
	"time"
)

// drainAfterKill is how long Exec, having killed the sandbox, waits for the last of
// its output: everything that held the pipes is dead by then, and this bounds the
// wait should anything have escaped the kill.
const drainAfterKill = 5 * time.Second

// outputs are the command's stdout and stderr, when they are not files: pipes of
// Exec's own that goroutines copy to the writers. With os/exec's pipes, Wait would
// wait for every holder of a pipe to close it, and a process of the sandbox that
// outlived a kill would hold Exec (and the Exec's caller) forever; here Exec waits
// for bwrap's exit alone, then for the copies as drain says.
//
// outputs is used by one goroutine (Exec's).
type outputs struct {
	child  []*os.File // the write ends, bwrap's; closed in cordon once it has started
	parent []*os.File // the read ends, which the copies read
	copies sync.WaitGroup
	once   sync.Once
}

// add returns what bwrap is to write w to: w itself when it is a file or nil (os/exec
// passes those as they are), otherwise a new pipe copied to w.
func (o *outputs) add(w io.Writer) (io.Writer, error) {
	if w == nil {
		return nil, nil
	}
	if f, ok := w.(*os.File); ok {
		return f, nil
	}
	r, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	o.child, o.parent = append(o.child, pw), append(o.parent, r)
	o.copies.Go(func() { _, _ = io.Copy(w, r) })
	return pw, nil
}

// closeChild closes the write ends in cordon: bwrap has its own copies, or failed to
// start.
func (o *outputs) closeChild() {
	for _, f := range o.child {
		f.Close()
	}
	o.child = nil
}

// drain waits for the copies to reach the end of their pipes (every writer gone) and
// closes the pipes. With limit >= 0 it waits at most limit, then closes the pipes
// under the copies, which end with what they had. It returns once the copies have
// ended; only the first call waits, later ones return at once.
func (o *outputs) drain(limit time.Duration) {
	o.once.Do(func() {
		done := make(chan struct{})
		go func() {
			o.copies.Wait()
			close(done)
		}()
		if limit < 0 {
			<-done
		} else {
			t := time.NewTimer(limit)
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
			}
		}
		for _, f := range o.parent {
			f.Close() // a copy blocked in Read returns (os.ErrClosed)
		}
		<-done
	})
}
