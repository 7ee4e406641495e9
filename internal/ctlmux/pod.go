package ctlmux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/paths"
)

// ProxyAddr is the only address the Pod's egress listener may have: the proxy address
// in the commands' network namespace. It is runner/sandbox's ProxyAddr (which
// internal/ may not import; a test of the placement holds them equal).
const ProxyAddr = "127.0.0.1:3128"

// GateSocket is the only path the Pod's gate listener may be bound to: the socket in
// the Pod's gate volume (paths.PodGate), which commands reach through the link at
// paths.SandboxGate, where `cordon gate` asks on every backend.
const GateSocket = paths.PodGate

// MaxExecs bounds the execs running at once on one stream: a request past it is
// answered with an error, never started.
const MaxExecs = 64

// outputGrace is how long an exec's exit waits for its output to be sent: a background
// child that inherited stdout would otherwise hold it forever. The supervisor waits
// as long again for what is still in flight.
const outputGrace = 250 * time.Millisecond

// stdinWindow is each exec's stdin window: the bytes the host sends before the pod
// has written them to the command. The stream's reader only queues stdin (at most the
// window), so a command that does not read its stdin stalls its stdin alone, never
// the stream: its signals (a timeout's kill), the other commands and the egress
// connections go on.
const stdinWindow = 256 << 10

// pod is the sandbox's end of the stream.
type pod struct {
	c     *ctl.Conn
	w     *writer
	conns *conns
	check func(*os.File) (byte, error) // checkListener; tests accept any listener

	lnMu     sync.Mutex     // lnMu guards lns and lnClosed.
	lns      []net.Listener // process 1's listeners, once its status handed them over
	lnClosed bool           // the relay is over: a listener taken now is closed

	mu    sync.Mutex // mu guards execs.
	execs map[uint64]*podExec
}

// podExec is what the relay holds of a running exec: the write end of its stdin, fed
// by a queue, and the read ends of its stdout and stderr, being sent.
type podExec struct {
	id      uint64
	w       *writer
	done    chan struct{} // closed when the exec is over
	in      *os.File
	out     [2]*os.File
	outDone chan struct{} // closed when both outputs ended

	mu     sync.Mutex    // mu guards the stdin queue below.
	queue  [][]byte      // received, to be written to the command
	queued int           // bytes received and not yet credited back
	ended  bool          // the host's stdin ended
	more   chan struct{} // a token when the queue or ended changed
}

// Pod relays between process 1's control connection c and the stream from [Host]
// (in and out: an exec's stdin and stdout). When process 1's status hands over its
// egress listener or its gate listener, it relays each connection accepted there to
// the host (conn.go).
// It returns when either side ends, having closed c, the listeners and every
// connection: process 1 then ends the session.
func Pod(c *ctl.Conn, in io.Reader, out io.Writer) error {
	return newPod(c, out, checkListener).run(in)
}

func newPod(c *ctl.Conn, out io.Writer, check func(*os.File) (byte, error)) *pod {
	w := &writer{w: out}
	return &pod{c: c, w: w, conns: newConns(w), check: check, execs: map[uint64]*podExec{}}
}

func (p *pod) run(in io.Reader) error {
	c := p.c
	done := make(chan error, 2)
	go func() { done <- p.fromHost(newReader(in)) }()
	go func() { done <- p.fromInit() }()
	err := <-done
	c.Close()
	p.lnMu.Lock()
	p.lnClosed = true
	for _, ln := range p.lns {
		ln.Close()
	}
	p.lnMu.Unlock()
	p.conns.end()
	p.mu.Lock()
	for id, e := range p.execs {
		e.close()
		delete(p.execs, id)
	}
	p.mu.Unlock()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

func (p *pod) fromHost(r *reader) error {
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
			switch m.Op {
			case ctl.OpExec:
				err = p.exec(m)
			case ctl.OpSignal, ctl.OpSpec:
				err = p.c.Send(m)
			}
			if err != nil {
				return err
			}
		case kindStdin:
			if e := p.get(f.id); e != nil {
				if err := e.push(f.data); err != nil {
					return err
				}
			}
		case kindEOF:
			if f.data[0] != 0 {
				return ErrProtocol // stdout and stderr are the pod's
			}
			if e := p.get(f.id); e != nil {
				if err := e.push(nil); err != nil {
					return err
				}
			}
		case kindConnData, kindConnEOF, kindConnClose, kindConnCredit:
			if err := p.conns.handle(f); err != nil {
				return err
			}
		default: // kindConnOpen included: connections are opened in the pod
			return ErrProtocol
		}
	}
}

// exec makes the command's three pipes, hands process 1 their ends with the request,
// and starts feeding and sending the other ends.
func (p *pod) exec(m ctl.Msg) error {
	p.mu.Lock()
	n, dup := len(p.execs), p.execs[m.ID] != nil
	p.mu.Unlock()
	if n >= MaxExecs || dup {
		return p.w.msg(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Error: "too many commands at once in this sandbox, or an exec id in use"})
	}
	var ends [6]*os.File // stdin r, w; stdout r, w; stderr r, w
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(ends[:])
			return p.w.msg(ctl.Msg{Op: ctl.OpExit, ID: m.ID, Error: "making the command's pipes: " + err.Error()})
		}
		ends[i], ends[i+1] = r, w
	}
	e := &podExec{id: m.ID, w: p.w, done: make(chan struct{}), in: ends[1],
		out: [2]*os.File{ends[2], ends[4]}, outDone: make(chan struct{}), more: make(chan struct{}, 1)}
	p.mu.Lock()
	p.execs[m.ID] = e
	p.mu.Unlock()
	err := p.c.Send(m, ends[0], ends[3], ends[5])
	closeAll([]*os.File{ends[0], ends[3], ends[5]}) // process 1 has its copies
	if err != nil {
		return err
	}
	go e.feed()
	var wg sync.WaitGroup
	wg.Add(2)
	for i, kind := range []byte{kindStdout, kindStderr} {
		go func() {
			defer wg.Done()
			p.w.data(kind, m.ID, byte(i+1), e.out[i])
		}()
	}
	go func() {
		wg.Wait()
		close(e.outDone)
	}()
	return nil
}

func (p *pod) get(id uint64) *podExec {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.execs[id]
}

// push queues stdin data (nil: its end) for the command; it never blocks. Data past
// the window, or after the end, is the host's protocol error.
func (e *podExec) push(data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.ended:
		return fmt.Errorf("%w: exec %d's stdin after its end", ErrProtocol, e.id)
	case data == nil:
		e.ended = true
	case e.queued+len(data) > stdinWindow:
		return fmt.Errorf("%w: exec %d's stdin past its window", ErrProtocol, e.id)
	default:
		e.queued += len(data)
		e.queue = append(e.queue, append([]byte(nil), data...))
	}
	select {
	case e.more <- struct{}{}:
	default:
	}
	return nil
}

// feed writes the queued stdin to the command until its end, or until the exec is
// over or the command stops reading (the rest is dropped), and gives the host back
// the window of what it wrote.
func (e *podExec) feed() {
	defer e.in.Close()
	for {
		e.mu.Lock()
		queue, ended := e.queue, e.ended
		e.queue = nil
		e.mu.Unlock()
		if len(queue) == 0 {
			if ended {
				return
			}
			select {
			case <-e.more:
				continue
			case <-e.done:
				return
			}
		}
		bufs := net.Buffers(queue)
		n, err := bufs.WriteTo(e.in)
		if err != nil {
			return
		}
		e.mu.Lock()
		e.queued -= int(n)
		e.mu.Unlock()
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(n))
		if e.w.frame(kindStdinCredit, e.id, b[:]) != nil {
			return
		}
	}
}

// close ends the exec: its queue, its stdin, and its outputs' read ends.
func (e *podExec) close() {
	close(e.done)
	e.in.Close()
	closeAll(e.out[:])
}

// fromInit sends process 1's messages to the host; an exit goes once the command's
// output has (or after outputGrace). Its first status may carry its listeners, which
// are then served ([pod.serve]); the status goes on without them.
func (p *pod) fromInit() error {
	status := false
	for {
		m, files, err := p.c.Recv()
		if err != nil {
			ctl.CloseFiles(files)
			return err
		}
		if m.Op == ctl.OpStatus && !status {
			status = true
			if err := p.takeListeners(files); err != nil {
				m.Error = strings.TrimPrefix(m.Error+"; ", "; ") + err.Error()
				_ = p.w.msg(m)
				return err
			}
			files = nil
		}
		ctl.CloseFiles(files)
		if m.Op != ctl.OpExit {
			if err := p.w.msg(m); err != nil {
				return err
			}
			continue
		}
		p.mu.Lock()
		e := p.execs[m.ID]
		delete(p.execs, m.ID)
		p.mu.Unlock()
		if e == nil {
			_ = p.w.msg(m)
			continue
		}
		go func() {
			select {
			case <-e.outDone:
			case <-time.After(outputGrace):
			}
			e.close()
			_ = p.w.msg(m)
		}()
	}
}

// takeListeners takes process 1's listeners out of its status (none: the spec has
// neither egress nor gates), checks them and starts accepting on them. Anything but at
// most one TCP listener on exactly [ProxyAddr], in a network namespace other than the
// relay's own (the Pod's, which has its eth0), and at most one unix listener on
// exactly [GateSocket], is refused, and so is the session. It closes every descriptor
// it does not keep.
func (p *pod) takeListeners(files []*os.File) error {
	defer ctl.CloseFiles(files)
	if len(files) > 2 {
		return fmt.Errorf("the listeners are refused: process 1 sent %d descriptors with its status, not at most its two listeners", len(files))
	}
	var lns []net.Listener
	var ports []byte
	var err error
	for _, f := range files {
		var port byte
		port, err = p.check(f)
		if err != nil {
			break
		}
		if slices.Contains(ports, port) {
			err = fmt.Errorf("process 1 sent two %s listeners", portName(port))
			break
		}
		var ln net.Listener
		if ln, err = net.FileListener(f); err != nil {
			break
		}
		lns, ports = append(lns, ln), append(ports, port)
	}
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return fmt.Errorf("the listeners are refused: %w", err)
	}
	p.lnMu.Lock()
	closed := p.lnClosed
	if !closed {
		p.lns = lns
	}
	p.lnMu.Unlock()
	if closed {
		for _, ln := range lns {
			ln.Close()
		}
		return errors.New("the relay ended while process 1 handed over its listeners")
	}
	for i, ln := range lns {
		go p.serve(ln, ports[i])
	}
	return nil
}

// serve relays each connection accepted on ln, process 1's listener for port, to the
// host, until ln is closed. A connection past the port's bound ([MaxConns],
// [MaxGateConns]) is closed at once (a reset).
func (p *pod) serve(ln net.Listener, port byte) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: try again
			continue
		}
		hc, ok := nc.(halfConn) // a TCP or a unix connection: both are
		m := p.conns
		m.mu.Lock()
		if !ok || m.ended || m.full(port) {
			m.mu.Unlock()
			if tc, ok := nc.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			nc.Close()
			continue
		}
		c := m.add(m.last+1, port, hc)
		m.mu.Unlock()
		if p.w.frame(kindConnOpen, c.id, []byte{port}) != nil {
			c.abort()
		}
		c.start()
	}
}
