package runner_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// loopbackBackend is a backend without a network namespace, as seatbelt is: its
// "sandbox" is the test process, which reaches the run's proxy only through the proxy
// variables the runner put in Host.Env.
type loopbackBackend struct{ t *testing.T }

func (loopbackBackend) Name() string                              { return "loopback-test" }
func (loopbackBackend) Check(context.Context) error               { return nil }
func (loopbackBackend) HostUID(*contract.Plan) (int, bool, error) { return 0, false, nil }
func (loopbackBackend) Warm(*contract.Plan, int) func()           { return nil }
func (loopbackBackend) CanStage() error                           { return sandbox.ErrNoStage }
func (loopbackBackend) LoopbackEgress() bool                      { return true }
func (b loopbackBackend) Start(_ context.Context, _ *contract.Plan, host sandbox.Host) (sandbox.Sandbox, error) {
	return &loopbackSandbox{t: b.t, host: host}, nil
}

type loopbackSandbox struct {
	t    *testing.T
	host sandbox.Host
}

func (s *loopbackSandbox) Close(context.Context) error               { return nil }
func (s *loopbackSandbox) StartsEarly() bool                         { return false }
func (s *loopbackSandbox) CgroupID() (uint64, error)                 { return 0, nil }
func (s *loopbackSandbox) SpillShown() string                        { return sandbox.SpillPath }
func (s *loopbackSandbox) SyncWorkspace(context.Context, bool) error { return nil }
func (s *loopbackSandbox) CommandCgroup(string) (*sandbox.CommandCgroup, error) {
	return nil, nil
}
func (s *loopbackSandbox) StagedWorkspace() (*os.File, error) { return nil, sandbox.ErrNoStage }

// Exec takes argv as URLs to GET through the proxy, with the token ("with") or without
// it ("without"), and writes each status; it fails unless every status is as argv says.
func (s *loopbackSandbox) Exec(ctx context.Context, p sandbox.Process) (int, error) {
	env := map[string]string{}
	for _, kv := range s.host.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	pu, err := url.Parse(env["HTTP_PROXY"])
	if err != nil || s.host.ControlSocket != "" || pu.Host != s.host.EgressAddr || env["ALL_PROXY"] != "socks5h://"+pu.User.String()+"@"+pu.Host {
		return 0, fmt.Errorf("proxy variables %q and %q for address %q (control socket %q)", env["HTTP_PROXY"], env["ALL_PROXY"], s.host.EgressAddr, s.host.ControlSocket)
	}
	code := 0
	for _, arg := range p.Argv {
		f := strings.Fields(arg) // how, URL, status wanted; anything else is a no-op
		if len(f) != 3 {
			continue
		}
		how, target, want := f[0], f[1], f[2]
		u := *pu
		if how == "without" {
			u.User = nil
		}
		tr := &http.Transport{Proxy: http.ProxyURL(&u)}
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(target)
		tr.CloseIdleConnections()
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		fmt.Fprintf(p.Stdout, "%s %s: %d\n", how, target, resp.StatusCode)
		if strconv.Itoa(resp.StatusCode) != want {
			code = 1
		}
	}
	return code, nil
}

// TestLoopbackEgress: for a backend without a network namespace the runner serves the
// egress proxy on a loopback TCP port, with the same rules and events: an allowed
// loopback server is reached, another port is denied (and reported in Result.Denied),
// and a client without the run's token is refused.
func TestLoopbackEgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			http.Error(w, "the proxy's token reached the destination", http.StatusTeapot)
		}
	}))
	defer srv.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := uint16(srv.Listener.Addr().(*net.TCPAddr).Port)
	ws := t.TempDir()
	plan := &contract.Plan{Workspace: ws, Workdir: ws, Egress: []contract.EgressRule{{Rule: policy.Rule{
		CIDR: netip.MustParsePrefix("127.0.0.1/32"), Ports: []uint16{port}, Why: "the test server"}}}}
	denied := "http://" + other.Addr().String() + "/"
	var out strings.Builder
	res, err := runner.Run(context.Background(), plan, []string{
		"with " + srv.URL + "/ 200", "with " + denied + " 403", "without " + srv.URL + "/ 407",
	}, runner.Options{Backend: loopbackBackend{t}, AuditRoot: t.TempDir(), RunRoot: t.TempDir(), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Errorf("exit %d:\n%s", res.ExitCode, out.String())
	}
	if !strings.Contains(fmt.Sprint(res.Denied), other.Addr().(*net.TCPAddr).AddrPort().String()) {
		t.Errorf("Denied %+v; want %s in it", res.Denied, other.Addr())
	}
}
