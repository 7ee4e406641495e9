package session

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// TestReadExec: output chunks go to the writers in order, the result comes last with
// its lists never nil; an error frame is an *Error with its code (125 without one);
// an answer that ends early or has a line past MaxFrameLine is an *Error, 125.
func TestReadExec(t *testing.T) {
	long := `{"fd":1,"data":"` + strings.Repeat("A", MaxFrameLine) + `"}` + "\n"
	tests := []struct {
		name, in       string
		stdout, stderr string
		exit, code     int
		wantErr        string
	}{
		{name: "result", in: `{"fd":1,"data":"b3V0"}` + "\n\n" + `{"fd":2,"data":"ZXJy"}` + "\n" + `{"fd":1,"data":"IQ=="}` + "\n" + `{"result":{"v":1,"exit_code":3}}`,
			stdout: "out!", stderr: "err", exit: 3},
		{name: "error frame", in: `{"error":"bad dir","code":2}` + "\n", code: 2, wantErr: "bad dir"},
		{name: "error frame without code", in: `{"error":"denied"}` + "\n", code: errdefs.ExitCannotRun, wantErr: "denied"},
		{name: "ends early", in: `{"fd":1,"data":"b3V0"}` + "\n", code: errdefs.ExitCannotRun, wantErr: "ended before the command's result"},
		{name: "long line", in: long + `{"result":{"v":1}}` + "\n", code: errdefs.ExitCannotRun, wantErr: "longer than"},
		{name: "not JSON", in: "HTTP/1.1 200 OK\n", code: errdefs.ExitCannotRun, wantErr: "ended before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			res, err := ReadExec(context.Background(), strings.NewReader(tt.in), "s1", ExecOptions{Stdout: &out, Stderr: &errOut})
			if tt.wantErr != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != tt.code || !strings.Contains(e.Msg, tt.wantErr) {
					t.Fatalf("ReadExec: %#v; want an *Error %d %q", err, tt.code, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.exit || out.String() != tt.stdout || errOut.String() != tt.stderr || res.Denied == nil || res.Alerts == nil || res.DeniedEgress == nil {
				t.Errorf("ReadExec: %+v, stdout %q, stderr %q", res, out.String(), errOut.String())
			}
		})
	}
}

// TestStartEnvIsLocal: the cordon Start runs never inherits $CORDON_HOST, which would
// send the session to a server (a server starting its sessions so would call itself).
func TestStartEnvIsLocal(t *testing.T) {
	t.Setenv("CORDON_HOST", "https://elsewhere:8443")
	for _, env := range [][]string{nil, {"A=1", "CORDON_HOST=unix:///s.sock", "CORDON_HOSTNAME=x"}} {
		got := localEnv(env)
		for _, kv := range got {
			if strings.HasPrefix(kv, "CORDON_HOST=") {
				t.Errorf("localEnv(%q) keeps %q", env, kv)
			}
		}
		if env != nil && (len(got) != 2 || got[0] != "A=1" || got[1] != "CORDON_HOSTNAME=x") {
			t.Errorf("localEnv(%q) = %q", env, got)
		}
	}
}
