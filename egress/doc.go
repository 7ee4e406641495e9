// Package egress is cordon's only way out of the sandbox: an allowlisting proxy that
// serves HTTP (absolute-form requests, with keep-alive), CONNECT tunnels and SOCKS5 on one
// listener.
//
// The sandbox has no network interface but loopback. Before any command exists, cordon's
// process 1 inside makes a listening TCP socket on 127.0.0.1:3128 in the sandbox's
// network namespace, sends that listening descriptor to cordon over the run's control
// channel (SCM_RIGHTS, in its hello) and closes its own copy; the runner checks it (TCP,
// listening, on that address, in a network namespace that is not cordon's own) and
// [Proxy.Serve] accepts on it. A connection is then sandbox TCP → [Proxy] → upstream TCP,
// with nothing relaying in between, and every byte that leaves goes through [Proxy],
// which:
//
//   - decides each destination with [policy.Policy]: the name first, then, after the proxy
//     resolved it itself, each address; it dials exactly an address it checked, by
//     [netip.AddrPort], never a host name, so DNS answers cannot change between check and
//     use;
//   - on CONNECT or SOCKS5 to port 443, reads the TLS ClientHello (buffered and replayed,
//     not consumed) and refuses a server name that differs from the requested host, so an
//     allowed address cannot be used to front for another name;
//   - on plain HTTP, requires the Host header to name the request target, strips
//     hop-by-hop and Proxy-* headers, and re-frames bodies itself so a smuggled second
//     request cannot reach the destination;
//   - with [Config.Intercept] set (credentials delivered by proxy), terminates TLS for the
//     credentials' hosts and only those, after verifying the destination's own
//     certificate, and swaps each placeholder for its credential in request headers (see
//     [Intercept]); every other destination is tunnelled untouched;
//   - bounds everything: concurrent connections ([Config.MaxConns]), handshake and idle
//     timeouts, fixed-size buffers;
//   - reports every attempt as exactly one [event.NetAllow] or [event.NetDeny] event whose
//     body is an [event.NetBody]; a refusal is reported before the client is told of it
//     (a 403 or 407, a SOCKS5 reply, a TLS alert), so a command that ends on the answer
//     finds the refusal in its result and its log.
//
// After the decision the bytes move kernel to kernel on Linux (splice(2) through a pipe,
// via internal/linux): a CONNECT or SOCKS5 tunnel once the ClientHello check is done,
// and a plain-HTTP response body framed by Content-Length, which http.Transport still
// frames (see bodySplice), so every request head on a kept-alive connection is still
// parsed and checked. Chunked and unframed bodies, request bodies (256 KiB at a time, see
// idleConn.ReadFrom), intercepted TLS and other systems copy through user memory. The
// splice calls are raw system calls (they cannot block): a Go system call wakes the
// runtime's sysmon thread whenever the process had gone idle, and a tunnel goes idle
// between every burst, which cost up to a fifth of the proxy's CPU. What is left of the
// proxy's CPU per GB is the kernel's TCP work for the second loopback hop;
// scripts/bench-egress.sh sets it beside a bare splice relay's. The socket a splice
// writes to gets a 4 MiB send buffer when net.core.wmem_max allows it
// (internal/linux.SpliceSendBuffer: fewer drains find it full, less proxy CPU per GB).
// Tunnels stay on splice rather than a BPF sockmap relay (an sk_skb verdict on a
// sockhash, tried three times for issue 39; the last, complete one is on branch
// sockmap-relay-experiment). It loads on this project's kernel (6.18) and can keep the
// tunnel's rules: per-socket byte counts in the program, the client side held for the
// ClientHello check then switched to redirect without reordering, the idle rule reading
// those counts, half-close once the other side has queued every byte (TCP_INFO's
// bytes_acked plus SIOCOUTQ), and bytes queued before a socket joins relayed at once
// (setting SO_RCVLOWAT runs the verdict). But it is not faster: through the proxy a
// CONNECT tunnel made 0.40-0.44 of direct where splice made 0.44-0.63 in the same
// minutes (scripts/bench-egress.sh, REPS=5), and as a bare relay (internal/sockmap's
// BenchmarkRelay on that branch) it matched splice, both at 0.47-0.51 of direct: on a
// 2-core machine the second loopback connection's TCP work, which costs about as much
// CPU as the direct transfer itself, is what limits any relay, and splice already kept
// the proxy out of the way. And it does not bound what it holds: the redirected buffers
// wait in the destination socket's psock queue, outside TCP memory accounting, while the
// source's window stays open (an upstream pushed 409 MiB in a second into a tunnel whose
// client read nothing; splice held 19 MiB). A bound looks possible (the program can read
// the peer's tcp_sock through a sockhash lookup and bpf_skc_to_tcp_sock, and holding a
// buffer on its own socket instead of redirecting it closes that socket's window at
// about 4 MiB), but was not built for a path no faster than splice.
//
// Descriptors move one way only, from the sandbox to cordon: the listener belongs to the
// sandbox's namespace, so serving it gives the host nothing new to reach. The upstream
// socket never leaves this process: handing it into the sandbox would put a
// host-namespace socket in the sandbox's process 1, and a TCP socket can be disconnected
// (connect with AF_UNSPEC) and reconnected anywhere from the host's namespace.
//
// Where the sandbox shares the host's network stack (seatbelt on macOS) there is no
// listener to hand over: the proxy listens on a loopback TCP port that every local
// process can reach, and [Config.Token] makes it serve only clients presenting the run's
// token (auth.go).
//
// SOCKS5 is a small server written here (RFC 1928: no authentication, or RFC 1929's
// username and password for the token; CONNECT only, with
// domain names, IPv4 and IPv6 addresses; BIND and UDP ASSOCIATE are refused). The
// maintained library candidate, github.com/things-go/go-socks5, is not served by the module
// proxy this project can reach, and github.com/armon/go-socks5 has been unmaintained since
// 2016 and resolves and dials on its own; the protocol subset needed is about 150 lines,
// and writing it keeps one resolve-check-dial path and one event per attempt for all three
// protocols.
//
// The package is unstable until cordon v1.
package egress
