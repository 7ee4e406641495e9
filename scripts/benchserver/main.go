// Command benchserver is the loopback HTTP server cordon's egress benchmarks download
// from: /big?n=BYTES streams n bytes, /small answers a few bytes with keep-alive.
//
// Usage: benchserver -listen 127.0.0.2:0 [-tls] (prints the address it listens on; with
// -tls it serves HTTPS with a throwaway self-signed certificate, for curl -k)
//
// With -relay ADDR it serves no HTTP: it relays every connection to ADDR, both ways,
// with io.Copy between the two TCP connections (which Go does with splice(2)) and nothing
// else. It is the floor the egress benchmark compares cordon's proxy with: what one more
// loopback hop through a user-space relay costs on this machine, with no policy at all.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func main() {
	listen := flag.String("listen", "127.0.0.2:0", "address to listen on")
	useTLS := flag.Bool("tls", false, "serve HTTPS with a self-signed certificate")
	relayTo := flag.String("relay", "", "relay every connection to this address instead of serving")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err == nil && *relayTo != "" {
		fmt.Println(ln.Addr().String())
		relay(ln, *relayTo)
		return
	}
	if err == nil && *useTLS {
		var cfg *tls.Config
		if cfg, err = selfSigned(); err == nil {
			ln = tls.NewListener(ln, cfg)
		}
	}
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

// relay relays each connection accepted on ln to addr until either side closes.
func relay(ln net.Listener, addr string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer u.Close()
			go func() {
				_, _ = io.Copy(u, c)
				_ = u.(*net.TCPConn).CloseWrite()
			}()
			_, _ = io.Copy(c, u)
		}()
	}
}

// selfSigned returns a TLS config with a fresh self-signed certificate for 127.0.0.2.
func selfSigned() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "benchserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.2")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, nil
}
