package sandboxinit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// A Pod's process 1 takes a session's spec and nothing else: no command of its own,
// no socket to dial, an egress listener on the proxy address only, and the spec first.
func TestRecvSpec(t *testing.T) {
	good := wire.Spec{Serve: true, Writable: []string{"/w"}, Env: []string{"A=1"}}
	for name, tc := range map[string]struct {
		m       ctl.Msg
		spec    *wire.Spec
		wantErr string
	}{
		"session":        {m: ctl.Msg{Op: ctl.OpSpec}, spec: &good},
		"not serving":    {m: ctl.Msg{Op: ctl.OpSpec}, spec: &wire.Spec{}, wantErr: "serves a session"},
		"its own argv":   {m: ctl.Msg{Op: ctl.OpSpec}, spec: &wire.Spec{Serve: true, Argv: []string{"sh"}}, wantErr: "serves a session"},
		"a socket":       {m: ctl.Msg{Op: ctl.OpSpec}, spec: &wire.Spec{Serve: true, Control: &wire.Control{Socket: "/x"}}, wantErr: "dials no control socket"},
		"egress":         {m: ctl.Msg{Op: ctl.OpSpec}, spec: &wire.Spec{Serve: true, Env: []string{"A=1"}, Egress: "127.0.0.1:3128"}},
		"other egress":   {m: ctl.Msg{Op: ctl.OpSpec}, spec: &wire.Spec{Serve: true, Egress: "127.0.0.1:1"}, wantErr: "on 127.0.0.1:3128 only"},
		"any egress":     {m: ctl.Msg{Op: ctl.OpSpec}, spec: &wire.Spec{Serve: true, Egress: "0.0.0.0:3128"}, wantErr: "on 127.0.0.1:3128 only"},
		"exec first":     {m: ctl.Msg{Op: ctl.OpExec, Argv: []string{"sh"}}, wantErr: "where the spec was due"},
		"not a spec":     {m: ctl.Msg{Op: ctl.OpSpec, Spec: json.RawMessage(`[1]`)}, wantErr: "reading the spec"},
		"empty spec msg": {m: ctl.Msg{Op: ctl.OpSpec}, wantErr: "reading the spec"},
	} {
		t.Run(name, func(t *testing.T) {
			a, b, err := linux.SeqpacketPair()
			if err != nil {
				t.Fatal(err)
			}
			host, init := ctl.New(a), ctl.New(b)
			defer host.Close()
			defer init.Close()
			if tc.spec != nil {
				tc.m.Spec, _ = json.Marshal(tc.spec)
			}
			if err := host.Send(tc.m); err != nil {
				t.Fatal(err)
			}
			got, err := recvSpec(init)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("recvSpec: %v", err)
			case tc.wantErr == "" && (!got.Serve || got.Env[0] != "A=1"):
				t.Errorf("spec = %+v", got)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("recvSpec = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
