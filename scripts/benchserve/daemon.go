package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// daemon is a running `cordon serve` and a client per tenant.
type daemon struct {
	cmd     *exec.Cmd
	stderr  strings.Builder
	clients []*client
	done    chan struct{}
}

// startDaemon writes a certificate, a key and the config under dir, starts the daemon
// and waits for its TCP listener.
func startDaemon(o options, dir string) (*daemon, error) {
	certPEM, keyPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	cert, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	if err := errors.Join(os.WriteFile(cert, certPEM, 0o600), os.WriteFile(key, keyPEM, 0o600)); err != nil {
		return nil, err
	}
	cfg, toks, err := writeConfig(o, dir, cert, key)
	if err != nil {
		return nil, err
	}
	d := &daemon{cmd: exec.Command(o.cordon, "serve", "--config", cfg), done: make(chan struct{})}
	pipe, err := d.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			var line struct{ Msg, Listener, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Listener == "tcp" {
				ready <- line.Addr
			} else if d.stderr.Len() < 1<<16 {
				d.stderr.WriteString(sc.Text() + "\n")
			}
		}
		close(ready)
		_ = d.cmd.Wait()
	}()
	var addr string
	select {
	case a, ok := <-ready:
		if !ok {
			return nil, fmt.Errorf("cordon serve exited before listening:\n%s", d.stderr.String())
		}
		addr = a
	case <-time.After(30 * time.Second):
		d.stop()
		return nil, errors.New("cordon serve is not listening after 30 s")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: o.sessions}
	for _, tok := range toks {
		d.clients = append(d.clients, &client{base: "https://" + addr, token: tok, http: &http.Client{Transport: tr}})
	}
	return d, nil
}

// stop ends the daemon with SIGTERM (its graceful stop) and waits for it.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// selfSigned is a certificate and key for 127.0.0.1, its own CA.
func selfSigned() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cordon-benchserve"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		BasicConstraintsValid: true,
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}
