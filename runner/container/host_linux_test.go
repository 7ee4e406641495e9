package container

import (
	"os"
	"strings"
	"testing"
)

func TestPayload(t *testing.T) {
	in := testInput(true)
	in.Host.Env = []string{"A=1"}
	p := Payload(in)
	if len(p.Env) != 1 || p.FilesDir != SecretsDir || len(p.Files) != 1 || p.Files[0].Name != "TOKEN" {
		t.Errorf("Payload: %+v", p)
	}
}

func TestOwner(t *testing.T) {
	me := Owner()
	if OwnerGone(me) {
		t.Fatalf("OwnerGone(%q) for this very process", me)
	}
	f := strings.Split(me, ":")
	// An owner in another pid namespace that no process is in is gone to root in the
	// host's pid namespace, which sees every process; anywhere else it cannot be told.
	ns, _ := os.Readlink("/proc/self/ns/pid")
	hostView := os.Geteuid() == 0 && ns == "pid:[4026531836]"
	cases := map[string]bool{
		"":                                true,     // missing
		"x:y:z":                           true,     // malformed
		f[0] + ":1:" + f[2]:               true,     // pid reused: another start time
		"999999999:1:" + f[2]:             true,     // no such process
		f[0] + ":" + f[1] + ":4026500000": hostView, // another pid namespace, which no process is in
	}
	for label, gone := range cases {
		if got := OwnerGone(label); got != gone {
			t.Errorf("OwnerGone(%q) = %v; want %v", label, got, gone)
		}
	}
}
