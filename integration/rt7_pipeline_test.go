package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// rawMCP is `cordon mcp` driven by hand, one JSON-RPC line at a time: what a hostile
// client writes, not what an SDK would.
type rawMCP struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     *os.File // the server's stdin, written line by line
	outF   *os.File // its stdout, read through out
	out    *bufio.Reader
	stderr *syncBuffer
	drains sync.Once // the one reader that discards the rest of out
}

// drain reads and discards the rest of the server's output in the background, once:
// a second call does nothing (two readers of out would race).
func (m *rawMCP) drain() {
	m.drains.Do(func() { go io.Copy(io.Discard, m.out) })
}

func (w *world) startRawMCP() *rawMCP {
	t := w.t
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testutil.Cordon(t), "mcp")
	cmd.Dir, cmd.Env, cmd.Stdin = w.ws, w.env, pr
	stdout, opw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = opw
	m := &rawMCP{t: t, cmd: cmd, in: pw, outF: stdout, out: bufio.NewReaderSize(stdout, 1<<20), stderr: &syncBuffer{}}
	cmd.Stderr = m.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	opw.Close()
	t.Cleanup(func() {
		pw.Close()
		m.drain()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		stdout.Close()
	})
	m.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"rt7","version":"1"}}}`)
	if line := m.line(); !strings.Contains(line, `"id":0`) || !strings.Contains(line, "result") {
		t.Fatalf("initialize answered %q; stderr %s", line, m.stderr)
	}
	m.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// send writes one line (a write under PIPE_BUF: whole or not at all).
func (m *rawMCP) send(line string) error {
	_, err := m.in.WriteString(line + "\n")
	return err
}

func (m *rawMCP) line() string {
	m.t.Helper()
	l, err := m.out.ReadString('\n')
	if err != nil {
		m.t.Fatalf("reading an answer: %v; stderr %s", err, m.stderr)
	}
	return l
}

// pipelineStall is how long a write to cordon mcp's stdin may stay blocked before
// the writer takes it that cordon stopped reading. A cordon that reads on takes each
// write in far less, however busy the machine; it is then written to for at most
// pipelineWrite in all (what it holds by then is past the memory bounds below).
const (
	pipelineStall = 5 * time.Second
	pipelineWrite = 20 * time.Second
)

// setPipelineDeadline sets f's write deadline for the next write: pipelineStall from
// now, or end if sooner.
func setPipelineDeadline(t *testing.T, f *os.File, end time.Time) {
	t.Helper()
	d := time.Now().Add(pipelineStall)
	if end.Before(d) {
		d = end
	}
	if err := f.SetWriteDeadline(d); err != nil {
		t.Fatal(err)
	}
}

// TestRT7MCPPipelinedUnread: a hostile agent over stdio writes requests and never reads
// the answers. cordon mcp must stop reading rather than hold every request and its
// answer: its memory stays bounded however long the agent writes, and every request
// it did read is answered once the agent reads.
func TestRT7MCPPipelinedUnread(t *testing.T) {
	w := newWorld(t)
	m := w.startRawMCP()
	id := mcpSessionOf(t, m)
	pid := m.cmd.Process.Pid
	before := procStatus(t, pid, "VmRSS")

	// Write until a write is blocked for pipelineStall (cordon stopped reading), for
	// pipelineWrite at most.
	end := time.Now().Add(pipelineWrite)
	sent := 0
	var werr error
	for sent < 2000000 {
		setPipelineDeadline(t, m.in, end)
		if werr = m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, sent+1)); werr != nil {
			break
		}
		sent++
	}
	after := procStatus(t, pid, "VmRSS")
	t.Logf("wrote %d tools/list requests unread (%v); cordon mcp RSS %d MiB before, %d MiB after", sent, werr, before>>20, after>>20)
	if !errors.Is(werr, os.ErrDeadlineExceeded) {
		t.Errorf("cordon mcp read all %d requests whose answers no one read: it did not push back", sent)
	}
	if after-before > 128<<20 {
		t.Errorf("cordon mcp grew by %d MiB holding requests whose answers no one read", (after-before)>>20)
	}
	_ = m.in.SetWriteDeadline(time.Time{})

	// Reading now, the agent gets an answer to every request it wrote, then its own.
	for i := 0; i < sent; i++ {
		m.line()
	}
	m.send(`{"jsonrpc":"2.0","id":"last","method":"ping"}`)
	if l := m.line(); !strings.Contains(l, `"id":"last"`) {
		t.Errorf("after the backlog, a ping was answered %q", l)
	}
	m.in.Close()
	w.assertSessionEnded(id)
}

// mcpSessionOf runs `true` through exec to learn m's session id.
func mcpSessionOf(t *testing.T, m *rawMCP) string {
	t.Helper()
	m.send(`{"jsonrpc":"2.0","id":"sid","method":"tools/call","params":{"name":"exec","arguments":{"command":"true"}}}`)
	l := m.line()
	i := strings.Index(l, `\"session\":\"`)
	if i < 0 {
		i = strings.Index(l, `"session":"`)
		if i < 0 {
			t.Fatalf("exec named no session: %s", l)
		}
		i += len(`"session":"`)
	} else {
		i += len(`\"session\":\"`)
	}
	j := strings.IndexAny(l[i:], `"\`)
	return l[i : i+j]
}

// TestRT7MCPBatch: a JSON-RPC batch of thousands of calls (from a client that claims
// protocol 2025-03-26, which had batches) is not parsed and queued whole: the
// connection ends, and so does its session, sealed. The SDK's decoder reads JSON
// values, not lines, so a batch after a message on the same line, past a CR, is one
// too.
func TestRT7MCPBatch(t *testing.T) {
	for name, before := range map[string]string{
		"own line":        "",
		"after a message": `{"jsonrpc":"2.0","id":"before","method":"ping"}` + "\r",
	} {
		t.Run(name, func(t *testing.T) { mcpBatch(t, before) })
	}
}

func mcpBatch(t *testing.T, before string) {
	w := newWorld(t)
	m := w.startRawMCP()
	id := mcpSessionOf(t, m)
	var b strings.Builder
	b.WriteString(before + "[")
	for i := range 100000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i+1)
	}
	b.WriteString("]")
	go func() { _, _ = m.in.WriteString(b.String() + "\n") }()
	// The connection must end at once; a minute bounds a server that serves it.
	if err := m.outF.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	n := 0
	var err error
	for err == nil {
		var l string
		if l, err = m.out.ReadString('\n'); err == nil && strings.Contains(l, `"tools"`) {
			n++
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a minute after a batch of 100000 calls, the connection is still up")
	}
	t.Logf("the batch of 100000 calls: %d answer line(s) before the connection ended; stderr: %s", n, m.stderr)
	if n > 0 {
		t.Errorf("a batch was served: %d answer line(s)", n)
	}
	w.assertSessionEnded(id)
}

// TestRT7MCPPipelinedBig: the same with requests near the 16 MiB line bound (an exec
// whose stdin passes its 8 MiB, refused at once, its answer unread): what cordon
// holds for answers waiting is bounded in bytes, not only in count. Each such
// request costs cordon mcp about 90 MiB while it is decoded and held; 31 of them
// took it to 1.1 GiB when only their count was bounded (64), 283 MiB now (two held,
// one being read).
func TestRT7MCPPipelinedBig(t *testing.T) {
	w := newWorld(t)
	m := w.startRawMCP()
	id := mcpSessionOf(t, m)
	pid := m.cmd.Process.Pid
	before := procStatus(t, pid, "VmRSS")
	end := time.Now().Add(pipelineWrite)
	setPipelineDeadline(t, m.in, end)
	// Answers no one reads fill the pipe first: the refusals below then wait.
	for i := range 40 {
		m.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"list%d","method":"tools/list"}`, i))
	}
	stdin := strings.Repeat("x", 15<<20)
	sent := 0
	var werr error
	for sent < 200 {
		setPipelineDeadline(t, m.in, end)
		if _, werr = m.in.WriteString(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"command":"true","stdin":"%s"}}}`+"\n", sent+1, stdin)); werr != nil {
			break
		}
		sent++
	}
	after := procStatus(t, pid, "VmRSS")
	t.Logf("wrote %d requests of 15 MiB unread (%v); cordon mcp RSS %d MiB before, %d MiB after", sent, werr, before>>20, after>>20)
	if after-before > 512<<20 {
		t.Errorf("cordon mcp grew by %d MiB holding requests whose answers no one read", (after-before)>>20)
	}
	_ = m.in.SetWriteDeadline(time.Time{})
	m.in.Close()
	m.drain() // its answers written, cordon mcp ends
	w.assertSessionEnded(id)
}
