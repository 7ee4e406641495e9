package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/server/config"
)

// listenUnix makes the unix socket u names, safely: its directory is checked to be the
// server user's own and writable by no one else (made, mode 0711, when missing), a
// socket already there is replaced only when it is one this user owns and nothing
// answers on it, and the socket is bound under umask 0177, so it is never reachable by
// anyone else before its mode and group are set.
func listenUnix(u *config.Unix) (*net.UnixListener, error) {
	dir := filepath.Dir(u.Path)
	err := paths.CheckDir(dir, paths.Owner())
	if errors.Is(err, fs.ErrNotExist) {
		if err = paths.MakeDir(dir, paths.Owner()); err == nil {
			err = os.Chmod(dir, 0o711) // reachable, not listable: the socket's mode decides who connects
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the socket's directory: %w", err)
	}
	gid := -1
	if u.Group != "" {
		if gid, err = lookupGroup(u.Group); err != nil {
			return nil, err
		}
	}
	if err := removeStale(u.Path); err != nil {
		return nil, err
	}
	old := linux.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: u.Path, Net: "unix"})
	linux.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", u.Path, err)
	}
	ln.SetUnlinkOnClose(true)
	if gid >= 0 {
		err = os.Chown(u.Path, -1, gid)
	}
	if err == nil {
		err = os.Chmod(u.Path, u.Mode)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("setting up %s: %w", u.Path, err)
	}
	return ln, nil
}

func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, errdefs.Invalidf("listen.unix.group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// removeStale removes what a server that died left at path: a socket this user owns
// that nothing answers on. Anything else there is refused, never removed.
func removeStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	owner := -1
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		owner = int(s.Uid)
	}
	if st.Mode().Type() != fs.ModeSocket || owner != paths.Owner() {
		return errdefs.Unavailablef("%s exists and is not a socket of uid %d; remove it if it is not needed", path, paths.Owner())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c, err := (&net.Dialer{}).DialContext(ctx, "unix", path); err == nil {
		c.Close()
		return errdefs.Unavailablef("%s: another server is listening on it", path)
	}
	return os.Remove(path)
}

// tlsConfig is the TCP listener's TLS: version 1.2 at least, HTTP/1.1 only, and client
// certificates verified against client_ca when one is set (asked for, not required:
// a client may authenticate with a token instead).
func tlsConfig(t *config.TCP) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, errdefs.Invalidf("listen.tcp cert and key: %w", err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
		ClientAuth:   tls.NoClientCert,
	}
	if t.ClientCA != "" {
		pem, err := os.ReadFile(t.ClientCA)
		if err != nil {
			return nil, errdefs.Invalidf("listen.tcp.client_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errdefs.Invalidf("listen.tcp.client_ca: %s holds no PEM certificate", t.ClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// limitListener accepts at most n connections at a time, and at most perPeer from one
// peer (a remote IP address, an IPv6 peer by its /64; on a unix socket, a uid): a
// connection past its peer's share is closed at once, so one client cannot take every
// slot from the others. When every slot is taken, a connection that is waiting (for
// its first request, or idle between requests) is closed to admit the new one: the
// oldest of the peer holding the most connections. Only a connection serving a request
// keeps its slot for sure, so clients that never authenticate cannot hold the
// listener's capacity ([Server.connState] tells which connections wait).
// (golang.org/x/net/netutil.LimitListener bounds the total only, blocks while idle
// connections hold the slots, and hides the connection the unix peer's uid must be
// read from.)
type limitListener struct {
	net.Listener
	perPeer int
	sem     chan struct{}
	done    chan struct{}
	wake    chan struct{} // signalled when a connection starts waiting
	once    sync.Once
	mu      sync.Mutex
	peers   map[string]int           // mu guards it: open connections by peer
	waiting map[*limitConn]time.Time // mu guards it: connections that may be closed for a new one, since when
}

func newLimitListener(ln net.Listener, n, perPeer int) *limitListener {
	return &limitListener{Listener: ln, perPeer: perPeer, sem: make(chan struct{}, n), done: make(chan struct{}),
		wake: make(chan struct{}, 1), peers: map[string]int{}, waiting: map[*limitConn]time.Time{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		if !l.acquire() {
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.sem
			return nil, err
		}
		lc := &limitConn{Conn: c, uid: -1, l: l}
		if uc, ok := c.(*net.UnixConn); ok {
			if uid, err := linux.PeerUID(uc); err == nil {
				lc.uid = uid
			}
		}
		lc.peer = peerOf(lc)
		if !l.take(lc.peer) {
			c.Close()
			<-l.sem
			continue
		}
		lc.release = func() { l.give(lc); <-l.sem }
		l.setWaiting(lc, true)
		return lc, nil
	}
}

// acquire takes a slot, closing a waiting connection for it when all are taken; it
// returns false once the listener is closed.
func (l *limitListener) acquire() bool {
	for {
		select {
		case l.sem <- struct{}{}:
			return true
		default:
		}
		if c := l.victim(); c != nil {
			c.Close() // gives its slot back
			continue
		}
		select {
		case l.sem <- struct{}{}:
			return true
		case <-l.wake:
		case <-l.done:
			return false
		}
	}
}

// victim picks the waiting connection to close for a new one: of the peer holding the
// most connections, the one waiting longest. It is no longer counted as waiting.
func (l *limitListener) victim() *limitConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v *limitConn
	for c, since := range l.waiting {
		if v == nil || l.peers[c.peer] > l.peers[v.peer] || l.peers[c.peer] == l.peers[v.peer] && since.Before(l.waiting[v]) {
			v = c
		}
	}
	if v != nil {
		delete(l.waiting, v)
	}
	return v
}

// setWaiting marks c as waiting (for a request) or not (serving one, or closed).
func (l *limitListener) setWaiting(c *limitConn, waiting bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !waiting || c.closed {
		delete(l.waiting, c)
		return
	}
	l.waiting[c] = time.Now()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// peerOf is who a connection is from, for the per-peer share: a uid, an IPv4
// address, or an IPv6 /64 (one host is commonly given a whole /64).
func peerOf(c *limitConn) string {
	if c.uid >= 0 {
		return "uid:" + strconv.Itoa(c.uid)
	}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		if ip4 := a.IP.To4(); ip4 != nil {
			return ip4.String()
		}
		return a.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return "unknown"
}

func (l *limitListener) take(peer string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers[peer] >= l.perPeer {
		return false
	}
	l.peers[peer]++
	return true
}

func (l *limitListener) give(c *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.closed = true
	delete(l.waiting, c)
	if l.peers[c.peer]--; l.peers[c.peer] <= 0 {
		delete(l.peers, c.peer)
	}
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn is one accepted connection; on a unix socket it carries its peer's uid,
// read from the kernel (SO_PEERCRED) when accepted, and -1 anywhere else (a TCP
// connection, or a peer the kernel could not name): no uid, never root's by default.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
	uid     int
	l       *limitListener
	peer    string
	closed  bool // l.mu guards it
}

func (c *limitConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
