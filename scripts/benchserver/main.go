// Command benchserver is the loopback HTTP server cordon's egress benchmarks download
// from: /big?n=BYTES streams n bytes, /small answers a few bytes with keep-alive.
//
// Usage: benchserver -listen 127.0.0.2:0 (prints the address it listens on)
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func main() {
	listen := flag.String("listen", "127.0.0.2:0", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchserver:", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		_, _ = io.CopyBuffer(w, io.LimitReader(zeros{}, n), make([]byte, 256<<10))
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	_ = http.Serve(ln, mux)
}
