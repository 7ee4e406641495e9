package egress

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/egress/policy"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// curl runs the real curl binary with args and no proxy settings from the environment,
// and returns its stdout, stderr and exit code.
func curl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	path, err := exec.LookPath("curl")
	testutil.Require(t, err == nil, "curl is needed (apt-get install curl)")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"-sS", "--max-time", "50"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running curl: %v", err)
	}
	return out.String(), errOut.String(), 0
}

func TestCurl(t *testing.T) {
	plain, tlsSrv := servers(t)
	hp, sp := portOf(t, plain.URL), portOf(t, tlsSrv.URL)
	other := freePort(t)
	res := fakeResolver{"example.com": addrs("127.0.0.1"), "internal.test": addrs("10.0.0.5")}
	e := startEnv(t, []policy.Rule{cidrRule(hp, sp), {Host: "internal.test", Ports: []uint16{hp}}}, res, Config{})
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := "http://" + e.addr
	hps, sps, others := strconv.Itoa(int(hp)), strconv.Itoa(int(sp)), strconv.Itoa(int(other))
	tests := []struct {
		name     string
		args     []string
		wantCode int    // curl's exit code
		wantOut  string // exact stdout; "" to skip
		wantErr  string // substring of stderr
		wantType event.Type
		reason   string
	}{
		{"http proxy http", []string{"-x", proxy, "http://127.0.0.1:" + hps + "/hello"}, 0, "hello\n", "", event.NetAllow, ""},
		{"http proxy https by name", []string{"-x", proxy, "--cacert", ca, "https://example.com:" + sps + "/hello"}, 0, "hello\n", "", event.NetAllow, ""},
		{"socks5-hostname http", []string{"--socks5-hostname", e.addr, "http://example.com:" + hps + "/hello"}, 0, "hello\n", "", event.NetAllow, ""},
		{"socks5-hostname https", []string{"--socks5-hostname", e.addr, "--cacert", ca, "https://example.com:" + sps + "/hello"}, 0, "hello\n", "", event.NetAllow, ""},
		{"socks5 ip", []string{"--socks5", e.addr, "http://127.0.0.1:" + hps + "/hello"}, 0, "hello\n", "", event.NetAllow, ""},
		{
			"http other port denied", []string{"-x", proxy, "http://127.0.0.1:" + others + "/"}, 0,
			denyBody("127.0.0.1:"+others, "no rule allows address 127.0.0.1 on port "+others,
				"network.allow: [{cidr: 127.0.0.1/32, ports: ["+others+"]}]"), "", event.NetDeny, "on port " + others,
		},
		{"connect denied", []string{"-x", proxy, "https://evil.test/"}, 56, "", "403", event.NetDeny, `no rule allows host "evil.test"`},
		{"userinfo stripped by curl", []string{"-x", proxy, "http://127.0.0.1@evil.test/"}, 0,
			denyBody("evil.test:80", `no rule allows host "evil.test"`, "network.allow: [{host: evil.test, ports: [80]}]"), "", event.NetDeny, "evil.test"},
		{"socks private resolution", []string{"--socks5-hostname", e.addr, "http://internal.test:" + hps + "/"}, 97, "", "SOCKS5 connection to internal.test. (2)", // 2: not allowed by ruleset
			event.NetDeny, "address 10.0.0.5 is private and no cidr rule names it"},
		{"http private resolution", []string{"-x", proxy, "http://internal.test:" + hps + "/"}, 0,
			denyBody("internal.test:"+hps, "address 10.0.0.5 is private and no cidr rule names it",
				"network.allow: [{cidr: 10.0.0.5/32, ports: ["+hps+"]}]"), "", event.NetDeny, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := curl(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("curl exit %d, want %d; stdout %q stderr %q", code, tt.wantCode, out, errOut)
			}
			if tt.wantOut != "" && out != tt.wantOut {
				t.Errorf("stdout %q\nwant   %q", out, tt.wantOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tt.wantErr)
			}
			typ, ev := e.events.nth(t, i+1)
			wantEvent(t, typ, ev, tt.wantType, event.NetBody{Reason: tt.reason})
		})
	}
	if e.dialedAddr(addrs("10.0.0.5")[0]) {
		t.Errorf("proxy dialled 10.0.0.5")
	}
}

func TestCurlHostRuleLoopbackDenied(t *testing.T) {
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	e := startEnv(t, []policy.Rule{{Host: "loop.test", Ports: []uint16{hp}}}, fakeResolver{"loop.test": addrs("127.0.0.1")}, Config{})
	hps := strconv.Itoa(int(hp))
	out, errOut, code := curl(t, "-x", "http://"+e.addr, "http://loop.test:"+hps+"/hello")
	want := denyBody("loop.test:"+hps, "address 127.0.0.1 is loopback and no cidr rule names it",
		"network.allow: [{cidr: 127.0.0.1/32, ports: ["+hps+"]}]")
	if code != 0 || out != want {
		t.Fatalf("curl: exit %d stdout %q stderr %q; want %q", code, out, errOut, want)
	}
	if len(e.dialed) != 0 {
		t.Errorf("proxy dialled %v", e.dialed)
	}
}

func TestCurlLargeDownload(t *testing.T) {
	const size = 64 << 20
	plain, _ := servers(t)
	hp := portOf(t, plain.URL)
	e := startEnv(t, []policy.Rule{cidrRule(hp)}, fakeResolver{}, Config{})
	file := filepath.Join(t.TempDir(), "out")
	url := plain.URL + "/bytes?n=" + strconv.Itoa(size) + "&seed=11"
	for _, args := range [][]string{{"-x", "http://" + e.addr}, {"--socks5-hostname", e.addr}} {
		if _, errOut, code := curl(t, append(args, "-o", file, url)...); code != 0 {
			t.Fatalf("curl %v: exit %d: %s", args, code, errOut)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256Hex(t, f)
		f.Close()
		if want := strconv.Itoa(size) + " " + testutil.SumOf(size, 11); got != want {
			t.Errorf("curl %v: got %s, want %s", args, got, want)
		}
	}
}
