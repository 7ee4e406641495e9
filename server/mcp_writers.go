package server

import (
	"bytes"
	"net/http"
	"strings"
	"time"
)

// captured is a ResponseWriter that keeps a handler's answer, to be read by the
// handler that called it (an MCP initialize's start); its connection's deadlines are
// the real request's.
type captured struct {
	w      http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.header }

func (c *captured) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *captured) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.body.Len() < maxBody { // a start's answer is one small object
		c.body.Write(p)
	}
	return len(p), nil
}

func (c *captured) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(c.w).SetWriteDeadline(t)
}

func (c *captured) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(c.w).SetReadDeadline(t)
}

// jsonErrors passes an answer through, but for a plain-text error (the MCP SDK's
// http.Error), which it answers as an api.Error, like every error of the API.
type jsonErrors struct {
	http.ResponseWriter
	rewrite bool
	status  int
	msg     []byte
}

// maxErrorText bounds the text of an error kept for its JSON answer.
const maxErrorText = 1024

// Unwrap lets an http.ResponseController reach the connection: flushing the
// transport's event stream, moving its deadlines.
func (w *jsonErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *jsonErrors) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.rewrite, w.status = true, status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *jsonErrors) Write(p []byte) (int, error) {
	if w.rewrite {
		if room := maxErrorText - len(w.msg); room > 0 {
			w.msg = append(w.msg, p[:min(room, len(p))]...)
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// finish writes the error kept, if any.
func (w *jsonErrors) finish() {
	if !w.rewrite {
		return
	}
	w.Header().Del("Content-Length")
	writeError(w.ResponseWriter, w.status, strings.TrimSpace(string(w.msg)))
}
