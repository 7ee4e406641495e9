package server

import (
	"encoding/json"
	"net/http"
	"time"
)

// lineStream is a streamed NDJSON answer (export, follow): headers go with the first
// line, and each write is flushed at once. The server's write timeout, which bounds a
// whole answer, does not fit a stream that lasts as long as a run: the deadline moves
// with each write instead, so a client that stops reading is cut off the response
// timeout (listen.timeouts.response) after its last progress rather than holding the stream. (Once the request is read,
// net/http lifts the read deadline itself, and a client that goes ends the request's
// context.)
type lineStream struct {
	w       http.ResponseWriter
	timeout time.Duration // each write's
	rc      *http.ResponseController
	started bool // the status and headers are sent
	failed  bool // a write failed: the client is gone
}

func newLineStream(w http.ResponseWriter, timeout time.Duration) *lineStream {
	return &lineStream{w: w, timeout: timeout, rc: http.NewResponseController(w)}
}

// Write implements io.Writer.
func (st *lineStream) Write(p []byte) (int, error) {
	if !st.started {
		st.started = true
		h := st.w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("X-Content-Type-Options", "nosniff")
		st.w.WriteHeader(http.StatusOK)
	}
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	n, err := st.w.Write(p)
	if err == nil {
		err = st.rc.Flush()
	}
	if err != nil {
		st.failed = true
	}
	return n, err
}

// end writes v as the stream's last line.
func (st *lineStream) end(v any) {
	b, err := json.Marshal(v)
	if err == nil {
		_, _ = st.Write(append(b, '\n'))
	}
}
