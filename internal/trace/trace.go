// Package trace records the phases of a run as spans (a name, a start and an end) and
// appends them, one JSON line each, to the file named by `--trace FILE` or
// $CORDON_TRACE. Every cordon process of a run (the CLI, the session supervisor,
// cordon-exec) appends to the same file, each line with its pid, so that one file
// shows the whole critical path on one clock (wall time, in nanoseconds).
//
// Tracing is off unless [Open] succeeded: [Begin] then returns a zero [Span] and
// [Span.End] does nothing, without reading the clock or allocating.
//
// The records are a measuring aid, not the audit log: their names may change between
// versions.
package trace

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// EnvVar names the file cordon processes append their spans to; `--trace FILE` sets
// it for the processes cordon starts.
const EnvVar = "CORDON_TRACE"

// Record is one line of a trace file.
type Record struct {
	Pid   int    `json:"pid"`      // the process that recorded the span
	Prog  string `json:"prog"`     // its name: cordon, cordon-exec, ...
	Name  string `json:"name"`     // the phase, dotted: runner.prepare, audit.fsync, ...
	Start int64  `json:"start_ns"` // wall clock, nanoseconds since the Unix epoch
	End   int64  `json:"end_ns"`
}

// initAt is when this package was initialised: about when the process's Go code
// began, after the runtime started.
var initAt = time.Now()

// Initialised is when this package was initialised: about when the process's Go
// code began, after the runtime had started.
func Initialised() time.Time { return initAt }

// out is the open trace, or nil when tracing is off.
var out atomic.Pointer[recorder]

// recorder appends records to one file; mu serialises its writes (each line is one
// write(2) on an O_APPEND file, so processes do not interleave within a line).
type recorder struct {
	mu   sync.Mutex
	f    *os.File
	pid  int
	prog string
}

// Open starts tracing to path (created 0600 if absent, appended to otherwise) as
// prog, and records the process's own start: "process.start" from the kernel's start
// time (a clock tick, 10 ms, of resolution) to this package's initialisation. A
// second Open replaces the first.
func Open(path, prog string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the trace file: %w", err)
	}
	r := &recorder{f: f, pid: os.Getpid(), prog: prog}
	if old := out.Swap(r); old != nil {
		old.f.Close()
	}
	if start, ok := ProcessStart(); ok {
		// At 10 ms of resolution the start may read as after the initialisation of
		// a process quicker than that: the phase is then shorter than the clock
		// tells, recorded as empty rather than left out.
		if start.After(initAt) {
			start = initAt
		}
		r.write("process.start", start, initAt)
	}
	return nil
}

// OpenFromEnv opens $CORDON_TRACE when it is set; a file that cannot be opened (a
// sandbox that cannot reach it) leaves tracing off.
func OpenFromEnv(prog string) {
	if p := os.Getenv(EnvVar); p != "" {
		_ = Open(p, prog)
	}
}

// Close stops tracing and closes the file.
func Close() error {
	if r := out.Swap(nil); r != nil {
		return r.f.Close()
	}
	return nil
}

// Enabled reports whether spans are being recorded.
func Enabled() bool { return out.Load() != nil }

// Span is one phase being timed; its zero value records nothing.
type Span struct {
	r     *recorder
	name  string
	start time.Time
}

// Begin starts timing the phase name; End records it.
func Begin(name string) Span {
	r := out.Load()
	if r == nil {
		return Span{}
	}
	return Span{r: r, name: name, start: time.Now()}
}

// End records the span, ending now.
func (s Span) End() {
	if s.r != nil {
		s.r.write(s.name, s.start, time.Now())
	}
}

// Add records a phase whose times were taken elsewhere (another process's, the
// kernel's).
func Add(name string, start, end time.Time) {
	if r := out.Load(); r != nil {
		r.write(name, start, end)
	}
}

func (r *recorder) write(name string, start, end time.Time) {
	b := make([]byte, 0, 128)
	b = append(b, `{"pid":`...)
	b = strconv.AppendInt(b, int64(r.pid), 10)
	b = append(b, `,"prog":`...)
	b = strconv.AppendQuote(b, r.prog)
	b = append(b, `,"name":`...)
	b = strconv.AppendQuote(b, name)
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, start.UnixNano(), 10)
	b = append(b, `,"end_ns":`...)
	b = strconv.AppendInt(b, end.UnixNano(), 10)
	b = append(b, "}\n"...)
	r.mu.Lock()
	_, _ = r.f.Write(b)
	r.mu.Unlock()
}

// ProcessStart is when the kernel started this process: /proc/self/stat's starttime
// (clock ticks since boot) against /proc/uptime, both at 10 ms resolution.
func ProcessStart() (time.Time, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return time.Time{}, false
	}
	up, err := os.ReadFile("/proc/uptime")
	now := time.Now()
	if err != nil {
		return time.Time{}, false
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from
	// after its last ')'. starttime is field 22, the 20th after it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	upFields := strings.Fields(string(up))
	if len(upFields) == 0 {
		return time.Time{}, false
	}
	uptime, err := strconv.ParseFloat(upFields[0], 64)
	if err != nil {
		return time.Time{}, false
	}
	const userHZ = 100 // USER_HZ, fixed by the kernel's ABI
	age := time.Duration(uptime*float64(time.Second)) - time.Duration(ticks)*time.Second/userHZ
	if age < 0 {
		age = 0
	}
	return now.Add(-age), true
}

// Seq times consecutive phases: each Next ends the phase before it and begins the
// next, End ends the last. Its zero value is ready to use.
type Seq struct{ cur Span }

// Next ends the current phase, if any, and begins name.
func (q *Seq) Next(name string) {
	q.cur.End()
	q.cur = Begin(name)
}

// End ends the current phase, if any.
func (q *Seq) End() {
	q.cur.End()
	q.cur = Span{}
}
