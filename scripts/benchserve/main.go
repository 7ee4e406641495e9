// Command benchserve measures `cordon serve` under load: it writes a config of T
// tenants (a token each), starts the daemon with TLS on loopback, and has every tenant
// run S concurrent sessions of E execs each through the TCP API. It prints the errors,
// the exec latency quantiles and the daemon's peak RSS as one table (and JSON with -json).
//
// Usage: benchserve -cordon bin/cordon [-tenants 5] [-sessions 10] [-execs 20] [-backend bwrap]
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

type options struct {
	cordon                   string
	tenants, sessions, execs int
	backend                  string
	asJSON                   bool
	claims, pool             int // claims measured against tenant t0's warm pool of pool sessions
}

func main() {
	var o options
	flag.StringVar(&o.cordon, "cordon", "bin/cordon", "the cordon binary")
	flag.IntVar(&o.tenants, "tenants", 5, "tenants")
	flag.IntVar(&o.sessions, "sessions", 10, "concurrent sessions per tenant")
	flag.IntVar(&o.execs, "execs", 20, "execs per session")
	flag.StringVar(&o.backend, "backend", "bwrap", "the sessions' backend")
	flag.BoolVar(&o.asJSON, "json", false, "print the figures as JSON")
	flag.IntVar(&o.claims, "claims", 0, "measure this many warm claims, cold starts and bare bwrap runs instead of the load")
	flag.IntVar(&o.pool, "pool", 2, "the warm pool of tenant t0 (with -claims)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "benchserve:", err)
		os.Exit(1)
	}
}

// figures is what one benchmark run measured.
type figures struct {
	Tenants, Sessions, Execs int
	Errors                   int
	FirstErrors              []string
	P50MS, P99MS, MaxMS      float64
	StartP50MS, StartP99MS   float64
	ServerPeakRSSKiB         int64
	WallS                    float64
}

func run(o options) error {
	dir, err := os.MkdirTemp("/var/tmp", "cordon-benchserve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(o, dir)
	if err != nil {
		return err
	}
	defer d.stop()
	if o.claims > 0 {
		return claims(o, d, filepath.Join(dir, "tenants", "t0", "run", "serve"))
	}
	f := load(o, d)
	f.ServerPeakRSSKiB = peakRSS(d.cmd.Process.Pid)
	if o.asJSON {
		return json.NewEncoder(os.Stdout).Encode(f)
	}
	fmt.Printf("%d tenants x %d sessions x %d execs (`true`, %s) through the TCP API, in %.1f s\n", f.Tenants, o.sessions, o.execs, o.backend, f.WallS)
	fmt.Printf("| errors | exec p50 | exec p99 | exec max | start p50 | start p99 | server peak RSS |\n|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %d of %d | %.1f ms | %.1f ms | %.1f ms | %.0f ms | %.0f ms | %.1f MiB |\n", f.Errors, o.tenants*o.sessions*(o.execs+2), f.P50MS, f.P99MS, f.MaxMS, f.StartP50MS, f.StartP99MS, float64(f.ServerPeakRSSKiB)/1024)
	for _, e := range f.FirstErrors {
		fmt.Println("error:", e)
	}
	return nil
}

// load runs every tenant's sessions at once and gathers the figures.
func load(o options, d *daemon) figures {
	var mu sync.Mutex
	f := figures{Tenants: o.tenants}
	var lat, starts []float64
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		f.Errors++
		if len(f.FirstErrors) < 5 {
			f.FirstErrors = append(f.FirstErrors, err.Error())
		}
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for ti := range o.tenants {
		for si := range o.sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := d.clients[ti]
				s0 := time.Now()
				id, err := c.start(api.StartRequest{Workspace: fmt.Sprintf("ws-%d", si), Backend: o.backend})
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				f.Sessions++
				starts = append(starts, ms(time.Since(s0)))
				mu.Unlock()
				for range o.execs {
					e0 := time.Now()
					if err := c.exec(id, []string{"true"}); err != nil {
						fail(err)
						continue
					}
					mu.Lock()
					f.Execs++
					lat = append(lat, ms(time.Since(e0)))
					mu.Unlock()
				}
				if err := c.stop(id); err != nil {
					fail(err)
				}
			}()
		}
	}
	wg.Wait()
	f.WallS = time.Since(t0).Seconds()
	f.P50MS, f.P99MS, f.MaxMS = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
	f.StartP50MS, f.StartP99MS = quantile(starts, 0.5), quantile(starts, 0.99)
	return f
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// peakRSS is a process's peak resident set (VmHWM), in KiB.
func peakRSS(pid int) int64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kib)
			return kib
		}
	}
	return 0
}

// client is one tenant's API client.
type client struct {
	base, token string
	http        *http.Client
}

func (c *client) do(method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", api.JSON)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s %s: %s %s", method, path, resp.Status, bytes.TrimSpace(msg))
	}
	return resp, nil
}

func (c *client) start(req api.StartRequest) (string, error) {
	s, err := c.startSession(req)
	return s.ID, err
}

func (c *client) startSession(req api.StartRequest) (api.Session, error) {
	var s api.Session
	resp, err := c.do("POST", "/v1/sessions", req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&s)
	return s, err
}

func (c *client) exec(id string, argv []string) error {
	_, err := c.execResult(id, argv)
	return err
}

// execResult runs argv in session id and returns its result (a non-zero exit is an
// error).
func (c *client) execResult(id string, argv []string) (*wire.Result, error) {
	resp, err := c.do("POST", "/v1/sessions/"+id+"/exec", api.ExecRequest{Argv: argv})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 2<<20)
	for sc.Scan() {
		var f wire.Frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			return nil, err
		}
		switch {
		case f.Error != "":
			return nil, errors.New(f.Error)
		case f.Result != nil:
			if f.Result.ExitCode != 0 {
				return nil, fmt.Errorf("exec %v: exit %d: %s", argv, f.Result.ExitCode, f.Result.Reason)
			}
			// The stream's end, read as session/remote does: the connection is then
			// kept for the next request.
			_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
			return f.Result, nil
		}
	}
	return nil, fmt.Errorf("exec %v: the stream ended without a result (%v)", argv, sc.Err())
}

func (c *client) get(id string) error {
	resp, err := c.do("GET", "/v1/sessions/"+id, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func (c *client) stop(id string) error {
	resp, err := c.do("POST", "/v1/sessions/"+id+"/stop", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// newToken is a bearer token and its config line's hash.
func newToken() (string, string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(tok))
	return tok, hex.EncodeToString(sum[:])
}

// writeConfig writes the daemon's config under dir and returns it with the tokens.
func writeConfig(o options, dir, cert, key string) (string, []string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nlisten:\n  tcp: {address: \"127.0.0.1:0\", cert: %s, key: %s}\ntenants:\n", cert, key)
	var toks []string
	for i := range o.tenants {
		tok, sum := newToken()
		toks = append(toks, tok)
		fmt.Fprintf(&b, "  - name: t%d\n    root: %s\n    credentials:\n      - {name: agent, roles: [agent], token_sha256: %s}\n", i, filepath.Join(dir, "tenants", fmt.Sprintf("t%d", i)), sum)
		// Room for every session of the load, each held to a small share.
		fmt.Fprintf(&b, "    quotas: {sessions: %d, memory: %dMiB, pids: %d, cpu: %d, session_default: {memory: 256MiB, pids: 256, cpu: 0.1}}\n",
			o.sessions+o.pool, 256*(o.sessions+o.pool), 256*(o.sessions+o.pool), o.sessions+o.pool)
		if i == 0 && o.pool > 0 {
			fmt.Fprintf(&b, "    pools: [{name: default, size: %d, backend: %s}]\n", o.pool, o.backend)
		}
	}
	cfg := filepath.Join(dir, "serve.yaml")
	return cfg, toks, os.WriteFile(cfg, []byte(b.String()), 0o600)
}
