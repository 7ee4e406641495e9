package container

import (
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
	cases := map[string]bool{
		"":                                true,  // missing
		"x:y:z":                           true,  // malformed
		f[0] + ":1:" + f[2]:               true,  // pid reused: another start time
		"999999999:1:" + f[2]:             true,  // no such process
		f[0] + ":" + f[1] + ":4026500000": false, // another pid namespace: cannot tell
	}
	for label, gone := range cases {
		if got := OwnerGone(label); got != gone {
			t.Errorf("OwnerGone(%q) = %v; want %v", label, got, gone)
		}
	}
}
