package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/sandboxinit/wire"
)

func TestWritePosture(t *testing.T) {
	long := strings.Repeat("/very/long/mount/point, ", 10)
	tests := []struct {
		name string
		b    doctorBackend
		want []string // lines, in order
		not  []string
	}{
		{
			name: "all ok",
			b: doctorBackend{Backend: "bwrap", View: "host view", OK: true, Checks: []wire.PostureCheck{
				{Name: "CapEff", Want: "0", Got: "0", OK: true},
				{Name: "seccomp: bpf", Want: "EPERM", Got: "EPERM", OK: true, Detail: "not shown"},
			}},
			want: []string{
				"bwrap (host view)",
				"CHECK         WANT   GOT    OK",
				"CapEff        0      0      ok",
				"seccomp: bpf  EPERM  EPERM  ok",
				"bwrap: all 2 checks ok",
			},
			not: []string{"not shown", "FAIL"},
		},
		{
			name: "a failure in full below the table",
			b: doctorBackend{Backend: "docker", View: "image busybox", Checks: []wire.PostureCheck{
				{Name: "host root", Want: "no", Got: "yes", OK: false, Detail: "core_pattern"},
				{Name: "read-write mounts", Want: "granted only", Got: long, OK: true},
			}},
			want: []string{
				"docker (image busybox)",
				"host root          no            yes",
				"read-write mounts  granted only  " + long[:maxGot-1] + "…  ok",
				"docker: 1 of 2 checks FAIL",
				"  FAIL host root: want no, got yes (core_pattern)",
			},
		},
		{
			name: "not built",
			b:    doctorBackend{Backend: "containerd", View: "host view", Error: "engine down"},
			want: []string{"containerd (host view): the sandbox could not be built: engine down"},
			not:  []string{"CHECK"},
		},
		{
			name: "skipped",
			b:    doctorBackend{Backend: "seatbelt", Skipped: "macOS only"},
			want: []string{"seatbelt: skipped: macOS only"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			writePosture(&buf, tt.b)
			got := buf.String()
			at := 0
			for _, line := range tt.want {
				i := strings.Index(got[at:], line)
				if i < 0 {
					t.Fatalf("got\n%s\nwant, after offset %d, the line %q", got, at, line)
				}
				at += i + len(line)
			}
			for _, s := range tt.not {
				if strings.Contains(got, s) {
					t.Errorf("got\n%s\nwant no %q", got, s)
				}
			}
		})
	}
}

func TestDoctorJSONAndExit(t *testing.T) {
	ok := doctorBackend{Backend: "bwrap", OK: true, Checks: []wire.PostureCheck{{Name: "x", Want: "0", Got: "0", OK: true}}}
	bad := doctorBackend{Backend: "docker", Checks: []wire.PostureCheck{{Name: "x", Want: "0", Got: "1"}}}
	broken := doctorBackend{Backend: "containerd", Error: "engine down"}
	skipped := doctorBackend{Backend: "seatbelt", Skipped: "macOS only"}
	tests := []struct {
		name     string
		backends []doctorBackend
		want     int
	}{
		{"all ok, one skipped", []doctorBackend{ok, skipped}, 0},
		{"a failed check", []doctorBackend{ok, bad}, 1},
		{"not built", []doctorBackend{ok, broken}, 125},
		{"a failed check wins over not built", []doctorBackend{broken, bad}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code := 0
			var st *errdefs.Status
			if err := doctorExit(doctorReport{Version: doctorVersion, Backends: tt.backends}); errors.As(err, &st) {
				code = errdefs.ExitCode(err)
			}
			if code != tt.want {
				t.Errorf("exit %d; want %d", code, tt.want)
			}
		})
	}

	var buf bytes.Buffer
	printDoctor(IO{Stdout: &buf}, doctorReport{Version: doctorVersion, Backends: []doctorBackend{ok}}, true)
	var back struct {
		Version  int `json:"version"`
		Backends []struct {
			Backend string              `json:"backend"`
			Checks  []wire.PostureCheck `json:"checks"`
		} `json:"backends"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Version != 1 || len(back.Backends) != 1 || back.Backends[0].Backend != "bwrap" || len(back.Backends[0].Checks) != 1 {
		t.Errorf("--json: got %s", buf.String())
	}
}

// doctor's flags that do not go together are usage errors (status 2), before anything
// is loaded or created.
func TestDoctorOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		o    doctorOptions
		want string // "" for none
	}{
		{doctorOptions{placement: "local"}, ""},
		{doctorOptions{placement: "local", backend: "bwrap"}, ""},
		{doctorOptions{placement: "kubernetes", placementConfig: "k8s.yaml"}, ""},
		{doctorOptions{placement: "kubernetes", placementConfig: "k8s.yaml", kubeconfig: "kc"}, ""},
		{doctorOptions{placement: "nomad"}, "want local or kubernetes"},
		{doctorOptions{placement: "kubernetes"}, "needs --placement-config"},
		{doctorOptions{placement: "kubernetes", placementConfig: "k8s.yaml", backend: "docker"}, "--backend is the local placement's"},
		{doctorOptions{placement: "local", placementConfig: "k8s.yaml"}, "add --placement kubernetes"},
		{doctorOptions{placement: "local", kubeconfig: "kc"}, "add --placement kubernetes"},
	} {
		err := tc.o.check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want no error", tc.o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || errdefs.ExitCode(err) != errdefs.ExitUsage):
			t.Errorf("%+v: %v, want a usage error saying %q", tc.o, err, tc.want)
		}
	}
}
