package ending

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/session/wire"
)

func TestDenied(t *testing.T) {
	var b strings.Builder
	Denied(&b, "example.com:443", "not in network.allow", "network.allow: [{host: example.com, ports: [443]}]")
	Denied(&b, "0x7f.1:443", "malformed request", "")
	want := "cordon: egress denied: example.com:443 (not in network.allow; to allow: network.allow: [{host: example.com, ports: [443]}])\n" +
		"cordon: egress denied: 0x7f.1:443 (malformed request)\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

// TestPrintDeniedHostileName: a name the sandbox sent (SOCKS5 carries any bytes) cannot
// forge a line of cordon's own or send a control code to the terminal (red team).
func TestDeniedHostileName(t *testing.T) {
	var b strings.Builder
	Denied(&b, "x\ncordon: FORGED LINE\n\x1b[31mRED\x1b[0m\u202e:443", "malformed request", "")
	got := b.String()
	if strings.Count(got, "\n") != 1 || strings.ContainsAny(got, "\x1b\r") || strings.Contains(got, "\u202e") {
		t.Fatalf("a hostile name reaches the terminal as is: %q", got)
	}
	want := `cordon: egress denied: x\x0acordon: FORGED LINE\x0a\x1b[31mRED\x1b[0m\u202e:443 (malformed request)` + "\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestEndingBoundedAndEscaped(t *testing.T) {
	var e Summary
	for i := range MaxLines + 5 {
		e.Denied = append(e.Denied, wire.Denial{Destination: fmt.Sprintf("h%d.example:443", i), Reason: "not in network.allow"})
	}
	e.Alerts = []wire.Alert{{Category: "write to a read-only path", Target: "/usr/bin/x\ncordon: forged", Syscall: "openat", Count: 2}}
	var b strings.Builder
	e.Print(&b)
	out := b.String()
	if n := strings.Count(out, "cordon: egress denied:"); n != MaxLines {
		t.Errorf("%d denial lines; want %d", n, MaxLines)
	}
	if !strings.Contains(out, "cordon: and 5 more denied destinations (cordon audit show)\n") {
		t.Errorf("no overflow line: %s", out)
	}
	if !strings.Contains(out, `cordon: monitor alert: write to a read-only path: /usr/bin/x\x0acordon: forged (openat, 2 times)`+"\n") {
		t.Errorf("alert line: %s", out)
	}
}

// TestAlertWithoutTarget: a gap alert names no path nor syscall; its line says so
// instead of printing empty fields ("could not log:  (, once)", red team B).
func TestAlertWithoutTarget(t *testing.T) {
	var b strings.Builder
	Alert(&b, wire.Alert{Category: "deviations the monitor could not log", Count: 1})
	Alert(&b, wire.Alert{Category: "exec of a risky program", Target: "/usr/bin/python3", Count: 2})
	want := "cordon: monitor alert: deviations the monitor could not log (once; cordon audit show says what)\n" +
		"cordon: monitor alert: exec of a risky program: /usr/bin/python3 (2 times)\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}
