package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPeekHead(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr error
	}{
		{"crlf", "GET / HTTP/1.1\r\nHost: a\r\n\r\nbody", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"bare lf", "GET / HTTP/1.1\nHost: a\n\nbody", "GET / HTTP/1.1\nHost: a\n\n", nil},
		{"mixed", "GET / HTTP/1.1\r\nHost: a\n\r\n", "GET / HTTP/1.1\r\nHost: a\n\r\n", nil},
		{"truncated", "GET / HTTP/1.1\r\nHost: a\r\n", "", io.EOF},
		{"too large", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 300) + "\r\n\r\n", "", errHeadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 256)
			got, err := peekHead(br)
			if !errors.Is(err, tt.wantErr) || string(got) != tt.want {
				t.Fatalf("peekHead = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
			if err == nil && br.Buffered() < len(got) {
				t.Errorf("peekHead consumed the head")
			}
		})
	}
}

func TestPeekHeadAlreadyBuffered(t *testing.T) {
	// The whole head arrives in one write and the client then waits: peekHead must answer
	// from the buffer without asking the connection for more.
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	go io.WriteString(client, "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(server)
	if _, err := br.Peek(1); err != nil { // the sniff
		t.Fatal(err)
	}
	server.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := peekHead(br); err != nil {
		t.Fatalf("peekHead: %v", err)
	}
}

func TestHeadHosts(t *testing.T) {
	head := []byte("GET http://a/ HTTP/1.1\r\nhost: one\r\nX: y\r\nHOST: two\r\n\r\n")
	if got := headHosts(head); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Errorf("headHosts = %q", got)
	}
}

func TestStripHop(t *testing.T) {
	h := http.Header{
		"Connection":          {"close, X-Drop"},
		"X-Drop":              {"1"},
		"Keep-Alive":          {"5"},
		"Proxy-Authorization": {"Basic x"},
		"Proxy-Whatever":      {"1"},
		"Te":                  {"trailers"},
		"Upgrade":             {"websocket"},
		"Transfer-Encoding":   {"chunked"},
		"Content-Length":      {"5"},
		"X-Keep":              {"1"},
		"Accept":              {"*/*"},
	}
	stripHop(h)
	if len(h) != 2 || h.Get("X-Keep") != "1" || h.Get("Accept") != "*/*" {
		t.Errorf("after stripHop: %v", h)
	}
}

func TestSplitAuthority(t *testing.T) {
	tests := []struct {
		in       string
		host     string
		port     uint16
		wantFail bool
	}{
		{"example.com", "example.com", 80, false},
		{"example.com:8080", "example.com", 8080, false},
		{"[::1]", "[::1]", 80, false},
		{"[::1]:81", "::1", 81, false},
		{"", "", 0, true},
		{"example.com:", "", 0, true},
		{"a:b:c", "", 0, true},
		{"example.com:080", "", 0, true},
	}
	for _, tt := range tests {
		host, port, err := splitAuthority(tt.in, 80)
		if (err != nil) != tt.wantFail || host != tt.host || port != tt.port {
			t.Errorf("splitAuthority(%q) = %q, %d, %v; want %q, %d, fail %v", tt.in, host, port, err, tt.host, tt.port, tt.wantFail)
		}
	}
}

func TestSNIMismatch(t *testing.T) {
	tests := []struct {
		name, host, sni string
		err             error
		ok              bool
	}{
		{"same", "example.com", "example.com", nil, true},
		{"case", "example.com", "Example.COM", nil, true},
		{"other", "example.com", "evil.com", nil, false},
		{"subdomain", "example.com", "a.example.com", nil, false},
		{"none for name", "example.com", "", nil, false},
		{"none for ip", "127.0.0.1", "", nil, true},
		{"none for ipv6", "::1", "", nil, true},
		{"name for ip", "127.0.0.1", "example.com", nil, false},
		{"malformed", "example.com", "example.com\x00", nil, false},
		{"not tls", "example.com", "", errors.New("x"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sniMismatch(tt.host, tt.sni, tt.err); (got == "") != tt.ok {
				t.Errorf("sniMismatch(%q, %q) = %q; want ok %v", tt.host, tt.sni, got, tt.ok)
			}
		})
	}
}

func TestReadClientHello(t *testing.T) {
	hello := clientHelloBytes(t, "example.com")
	rest := []byte("after the hello")
	r := bufio.NewReader(io.MultiReader(bytes.NewReader(hello), bytes.NewReader(rest)))
	sni, consumed, err := readClientHello(r)
	if err != nil || sni != "example.com" {
		t.Fatalf("readClientHello = %q, %v", sni, err)
	}
	remaining, _ := io.ReadAll(r)
	if got := append(consumed, remaining...); !bytes.Equal(got, append(hello, rest...)) {
		t.Errorf("bytes lost: consumed %d + remaining %d, want %d", len(consumed), len(remaining), len(hello)+len(rest))
	}
	if _, _, err := readClientHello(strings.NewReader("GET / HTTP/1.1\r\n\r\n")); err == nil {
		t.Errorf("readClientHello accepted plain HTTP")
	}
}

// clientHelloBytes returns the first flight of a real crypto/tls client for serverName.
func clientHelloBytes(t *testing.T, serverName string) []byte {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		tls.Client(client, &tls.Config{ServerName: serverName}).Handshake()
		client.Close()
	}()
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf bytes.Buffer
	// Read the handshake record header and body only.
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(server, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(server, body); err != nil {
		t.Fatal(err)
	}
	buf.Write(hdr)
	buf.Write(body)
	return buf.Bytes()
}

func TestWriteResponseFraming(t *testing.T) {
	tests := []struct {
		name   string
		method string
		minor  int // HTTP/1.minor
		resp   *http.Response
		want   []string // substrings of the output
		absent []string
	}{
		{
			"known length", "GET", 1,
			&http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Connection": {"keep-alive"}}, ContentLength: 5, Body: io.NopCloser(strings.NewReader("hello"))},
			[]string{"HTTP/1.1 200 OK\r\n", "Content-Length: 5\r\n", "\r\n\r\nhello"}, []string{"Connection", "chunked"},
		},
		{
			"unknown length chunked", "GET", 1,
			&http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, ContentLength: -1, Body: io.NopCloser(strings.NewReader("hello"))},
			[]string{"Transfer-Encoding: chunked\r\n", "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"}, []string{"Content-Length"},
		},
		{
			"http/1.0 close delimited", "GET", 0,
			&http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, ContentLength: -1, Body: io.NopCloser(strings.NewReader("hello"))},
			[]string{"Connection: close\r\n", "\r\n\r\nhello"}, []string{"chunked", "Content-Length"},
		},
		{
			"head keeps length", "HEAD", 1,
			&http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, ContentLength: 42, Body: http.NoBody},
			[]string{"Content-Length: 42\r\n"}, []string{"chunked"},
		},
		{
			"no content", "GET", 1,
			&http.Response{StatusCode: 204, Status: "204 No Content", Header: http.Header{}, ContentLength: -1, Body: http.NoBody},
			[]string{"HTTP/1.1 204 No Content\r\n"}, []string{"chunked", "Content-Length"},
		},
		{
			"status text sanitised", "GET", 1,
			&http.Response{StatusCode: 200, Status: "200 O\x01K", Header: http.Header{}, ContentLength: 0, Body: http.NoBody},
			[]string{"HTTP/1.1 200 O?K\r\n"}, nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			bw := bufio.NewWriter(&out)
			req := &http.Request{Method: tt.method, ProtoMajor: 1, ProtoMinor: tt.minor}
			if _, err := writeResponse(bw, nil, nil, req, tt.resp); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %q lacks %q", out.String(), w)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out.String(), a) {
					t.Errorf("output %q has %q", out.String(), a)
				}
			}
		})
	}
}

func TestWriteResponseShortBody(t *testing.T) {
	var out bytes.Buffer
	resp := &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, ContentLength: 10, Body: io.NopCloser(strings.NewReader("short"))}
	if _, err := writeResponse(bufio.NewWriter(&out), nil, nil, &http.Request{Method: "GET", ProtoMajor: 1, ProtoMinor: 1}, resp); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("writeResponse of a short body: %v, want ErrUnexpectedEOF", err)
	}
}
