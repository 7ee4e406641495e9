package ctlmux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
)

// host is cordon's end of the stream.
type host struct {
	c     *ctl.Conn
	w     *writer
	conns *conns
	ls    Listeners // a nil one: the spec has not the service, and no connection to it may be opened

	mu    sync.Mutex // mu guards execs.
	execs map[uint64]*hostExec
}

// hostExec is what the host holds of a running exec: its stdin (being read, and sent
// within the window the pod gives) and its stdout and stderr (nil once closed).
type hostExec struct {
	in  *os.File
	out [2]*os.File

	mu     sync.Mutex    // mu guards credit and over.
	credit int           // stdin bytes it may still send
	over   bool          // closed: its stdin is not sent any more
	more   chan struct{} // a token when credit or over changed
}

func (e *hostExec) close() {
	e.mu.Lock()
	e.over = true
	e.mu.Unlock()
	e.signal()
	e.in.Close()
	closeAll(e.out[:])
}

func (e *hostExec) signal() {
	select {
	case e.more <- struct{}{}:
	default:
	}
}

// give adds n bytes of stdin window; false when that is past the window.
func (e *hostExec) give(n int) bool {
	e.mu.Lock()
	ok := n > 0 && e.credit+n <= stdinWindow
	if ok {
		e.credit += n
	}
	e.mu.Unlock()
	e.signal()
	return ok
}

// pumpStdin sends the exec's stdin within its window until its end (then the end of
// the stream), or until the exec is over.
func (e *hostExec) pumpStdin(w *writer, id uint64) {
	buf := make([]byte, maxData)
	for {
		e.mu.Lock()
		credit, over := e.credit, e.over
		e.mu.Unlock()
		if over {
			return
		}
		if credit == 0 {
			<-e.more
			continue
		}
		n, err := e.in.Read(buf[:min(credit, maxData)])
		if n > 0 {
			e.mu.Lock()
			e.credit -= n
			e.mu.Unlock()
			if w.frame(kindStdin, id, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = w.frame(kindEOF, id, []byte{0})
			return
		}
	}
}

// Host relays between c, whose peer is cordon's supervisor (it sees c's peer as it
// sees process 1's own connection on the other backends), and stream, which reaches
// [Pod] in the sandbox. Each exec request's stdin is read and sent as data (within
// the window the pod gives back as it writes it to the command), and the
// data that comes back for its stdout and stderr is written to the request's other
// two descriptors; further descriptors (a cgroup: the Pod's cgroup is the kubelet's)
// are closed. Each connection the pod relays is delivered on its service's listener in
// ls (a nil one: the spec has not that service, and the pod may open no connection to
// it). It returns when either side ends, having closed stream, c, the listeners, every
// connection and every descriptor it holds.
func Host(c *ctl.Conn, stream io.ReadWriteCloser, ls Listeners) error {
	return newHost(c, stream, ls).run(stream)
}

func newHost(c *ctl.Conn, stream io.Writer, ls Listeners) *host {
	w := &writer{w: stream}
	return &host{c: c, w: w, conns: newConns(w), ls: ls, execs: map[uint64]*hostExec{}}
}

func (h *host) run(stream io.ReadWriteCloser) error {
	c := h.c
	fromPod := make(chan error, 1)
	go func() { fromPod <- h.fromPod(newReader(stream)) }()
	fromSup := make(chan error, 1)
	go func() { fromSup <- h.fromSupervisor() }()
	var err error
	select {
	case err = <-fromPod:
		c.Close()
		<-fromSup
	case err = <-fromSup:
		stream.Close()
		c.Close()
		<-fromPod
	}
	stream.Close()
	for _, l := range []*Listener{h.ls.Egress, h.ls.Gate} {
		if l != nil {
			l.Close()
		}
	}
	h.conns.end()
	h.mu.Lock()
	for id, e := range h.execs {
		e.close()
		delete(h.execs, id)
	}
	h.mu.Unlock()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

func (h *host) fromSupervisor() error {
	for {
		m, files, err := h.c.Recv()
		if err != nil {
			return err
		}
		switch m.Op {
		case ctl.OpExec:
			if err := h.exec(m, files); err != nil {
				return err
			}
		case ctl.OpSignal, ctl.OpSpec:
			ctl.CloseFiles(files)
			if err := h.w.msg(m); err != nil {
				return err
			}
		default:
			ctl.CloseFiles(files)
		}
	}
}

// exec sends one exec request and starts pumping its stdin.
func (h *host) exec(m ctl.Msg, files []*os.File) error {
	if len(files) < 3 {
		ctl.CloseFiles(files)
		return h.c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Error: "malformed exec request"})
	}
	ctl.CloseFiles(files[3:])
	e := &hostExec{in: linux.Pollable(files[0]), out: [2]*os.File{files[1], files[2]},
		credit: stdinWindow, more: make(chan struct{}, 1)}
	h.mu.Lock()
	_, dup := h.execs[m.ID]
	if !dup {
		h.execs[m.ID] = e
	}
	h.mu.Unlock()
	if dup {
		e.close()
		return h.c.Send(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Error: "exec id in use"})
	}
	if err := h.w.msg(m); err != nil {
		return err // Host closes e with the rest
	}
	// Read until its end, or until the exec is over (finish closes it).
	go e.pumpStdin(h.w, m.ID)
	return nil
}

// fromPod writes what the pod sends for each exec to its descriptors, and hands
// process 1's messages to the supervisor.
func (h *host) fromPod(r *reader) error {
	for {
		f, err := r.next()
		if err != nil {
			return err
		}
		switch f.kind {
		case kindMsg:
			m, err := decodeMsg(f)
			if err != nil {
				return err
			}
			if m.Op != ctl.OpExit && m.Op != ctl.OpStatus {
				continue
			}
			if m.Op == ctl.OpExit {
				h.finish(m.ID)
			}
			if err := h.c.Send(m); err != nil {
				return err
			}
		case kindStdout, kindStderr:
			idx := int(f.kind - kindStdout)
			if out := h.sink(f.id, idx); out != nil {
				if _, err := out.Write(f.data); err != nil {
					h.closeSink(f.id, idx) // the reader is gone: the rest is dropped
				}
			}
		case kindEOF:
			if f.data[0] == 0 {
				return ErrProtocol // stdin is the host's
			}
			h.closeSink(f.id, int(f.data[0])-1)
		case kindStdinCredit:
			h.mu.Lock()
			e := h.execs[f.id]
			h.mu.Unlock()
			// An exec over is forgotten: its last credits may still come.
			if e != nil && !e.give(int(binary.BigEndian.Uint32(f.data))) {
				return fmt.Errorf("%w: exec %d's stdin credit past its window", ErrProtocol, f.id)
			}
		case kindConnOpen:
			if err := h.open(f.id, f.data[0]); err != nil {
				return err
			}
		case kindConnData, kindConnEOF, kindConnClose, kindConnCredit:
			if err := h.conns.handle(f); err != nil {
				return err
			}
		default:
			return ErrProtocol
		}
	}
}

// open takes a connection the pod accepted on port and delivers one end of a socket
// pair on that port's listener, relaying the other. A pair that cannot be made, or a
// listener already closed, resets the connection.
func (h *host) open(id uint64, port byte) error {
	ln := h.ls.Egress
	if port == portGate {
		ln = h.ls.Gate
	}
	m := h.conns
	m.mu.Lock()
	switch {
	case ln == nil:
		m.mu.Unlock()
		return fmt.Errorf("%w: a %s connection where the spec has no %s", ErrProtocol, portName(port), portName(port))
	case id <= m.last:
		m.mu.Unlock()
		return fmt.Errorf("%w: %s connection %d opened out of order", ErrProtocol, portName(port), id)
	case m.full(port):
		m.mu.Unlock()
		return fmt.Errorf("%w: more than %d %s connections at once", ErrProtocol, maxConnsOf(port), portName(port))
	}
	ours, theirs, err := linux.StreamPair()
	var c *relayConn
	if err != nil {
		c = m.add(id, port, nil)
	} else {
		c = m.add(id, port, ours)
	}
	m.mu.Unlock()
	if err == nil && !ln.deliver(theirs) {
		theirs.Close()
		c.abort()
	}
	c.start()
	return nil
}

func (h *host) sink(id uint64, idx int) *os.File {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.execs[id]; e != nil {
		return e.out[idx]
	}
	return nil
}

func (h *host) closeSink(id uint64, idx int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.execs[id]; e != nil && e.out[idx] != nil {
		e.out[idx].Close()
		e.out[idx] = nil
	}
}

// finish closes what is left of an exec's output: its exit comes after the output
// the pod had for it.
func (h *host) finish(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.execs[id]; e != nil {
		e.close()
		delete(h.execs, id)
	}
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
