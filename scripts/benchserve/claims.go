package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// claims measures, side by side, a session start plus its first `exec -- true`
// through the TCP API three ways: claimed from tenant t0's warm pool, started cold in a
// new workspace, and a bare `bwrap … true` for scale. Between claims it waits for the
// pool to be full again (it reads the server's records, as root on this host), so each
// claim finds a warm session; a claim that did not is counted as a miss.
//
// The warm claims are then broken down into phases, each timed on its own: the start
// request (the claim), the first exec request and, inside it, the command's duration
// as the session's supervisor measured it; after the timed claim, not counted in it,
// a GET of the session (an API round trip with a record read: the floor of any
// request) and a second exec (an exec once the session has run one).
func claims(o options, d *daemon, serve string) error {
	c := d.clients[0]
	var warm, cold, bare []float64
	var ph phases
	misses := 0
	for i := range o.claims {
		if err := waitWarm(serve, o.pool); err != nil {
			return err
		}
		t0 := time.Now()
		s, err := c.startSession(api.StartRequest{})
		t1 := time.Now()
		var res *wire.Result
		if err == nil {
			res, err = c.execResult(s.ID, []string{"true"})
		}
		if err != nil {
			return fmt.Errorf("warm claim %d: %w", i, err)
		}
		t2 := time.Now()
		warm = append(warm, ms(t2.Sub(t0)))
		if !s.Warm {
			misses++
		}
		if err := ph.add(c, s.ID, t1.Sub(t0), t2.Sub(t1), res); err != nil {
			return fmt.Errorf("warm claim %d: %w", i, err)
		}
		if err := c.stop(s.ID); err != nil {
			return err
		}
		t0 = time.Now()
		id, err := c.start(api.StartRequest{Workspace: fmt.Sprintf("cold-%d", i), Backend: o.backend})
		if err == nil {
			err = c.exec(id, []string{"true"})
		}
		if err != nil {
			return fmt.Errorf("cold start %d: %w", i, err)
		}
		cold = append(cold, ms(time.Since(t0)))
		if err := c.stop(id); err != nil {
			return err
		}
		t0 = time.Now()
		if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
			"--die-with-parent", "--new-session", "--cap-drop", "ALL", "/bin/true").CombinedOutput(); err != nil {
			return fmt.Errorf("bwrap: %v: %s", err, out)
		}
		bare = append(bare, ms(time.Since(t0)))
	}
	b := quantile(bare, 0.5)
	fmt.Printf("session start + first exec -- true through the TCP API (%s), %d each, medians (p90):\n", o.backend, o.claims)
	fmt.Printf("| | median | p90 | vs bare bwrap |\n|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		xs   []float64
	}{{"warm claim + exec", warm}, {"cold start + exec", cold}, {"bare bwrap true", bare}} {
		fmt.Printf("| %s | %.1f ms | %.1f ms | %.2fx |\n", r.name, quantile(r.xs, 0.5), quantile(r.xs, 0.9), quantile(r.xs, 0.5)/b)
	}
	fmt.Printf("pool misses: %d of %d claims\n", misses, o.claims)
	ph.print()
	return nil
}

// phases are the warm claims' phases, in ms.
type phases struct {
	start, exec, command, get, exec2 []float64
}

// add records one warm claim's start and first exec, then times a GET of the session
// and a second exec.
func (p *phases) add(c *client, id string, start, exec time.Duration, res *wire.Result) error {
	p.start = append(p.start, ms(start))
	p.exec = append(p.exec, ms(exec))
	p.command = append(p.command, float64(res.DurationMS))
	t0 := time.Now()
	if err := c.get(id); err != nil {
		return err
	}
	p.get = append(p.get, ms(time.Since(t0)))
	t0 = time.Now()
	if err := c.exec(id, []string{"true"}); err != nil {
		return err
	}
	p.exec2 = append(p.exec2, ms(time.Since(t0)))
	return nil
}

func (p *phases) print() {
	fmt.Printf("\nwarm claim + exec, by phase, medians (p90):\n| phase | median | p90 |\n|---|---|---|\n")
	for _, r := range []struct {
		name string
		xs   []float64
	}{
		{"start request (the claim)", p.start},
		{"first exec request", p.exec},
		{"  of which the command (supervisor's duration_ms)", p.command},
		{"GET of the session (API round trip floor), after", p.get},
		{"second exec request, after", p.exec2},
	} {
		fmt.Printf("| %s | %.1f ms | %.1f ms |\n", r.name, quantile(r.xs, 0.5), quantile(r.xs, 0.9))
	}
}

// waitWarm waits until the server's records show n unclaimed warm sessions.
func waitWarm(serve string, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ms, _ := filepath.Glob(filepath.Join(serve, "*.json"))
		k := 0
		for _, m := range ms {
			data, err := os.ReadFile(m)
			var rec struct{ Warm, Stopped bool }
			if err == nil && json.Unmarshal(data, &rec) == nil && rec.Warm && !rec.Stopped {
				k++
			}
		}
		if k >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pool holds %d of %d sessions after 2 minutes", k, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
