package config

import (
	"math"
	"strings"
	"testing"
	"time"
)

// quotaTenant is base with one tenant whose quotas are q (a flow mapping); its
// quotas line is line 7 and the mapping opens at column 13.
func quotaTenant(q string) string {
	return base + "  - name: a\n    root: /a\n    quotas: " + q + "\n"
}

// TestQuotasDefault: a tenant without quotas gets DefaultQuotas, every field set.
func TestQuotasDefault(t *testing.T) {
	c, err := Parse("f.yaml", []byte(base+"  - {name: a, root: /a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, want := c.Tenants[0].Quotas, DefaultQuotas()
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
	if want.Session != (SessionLimits{Memory: 2 << 30, Pids: 2048, CPU: 0.5}) {
		t.Errorf("default per-session share: got %+v", want.Session)
	}
}

func TestQuotasParse(t *testing.T) {
	c, err := Parse("f.yaml", []byte(quotaTenant(`{sessions: 10, memory: 20GiB, pids: 10000, cpu: 2.5, wall: 30m, mcp_idle: 90s, audit: 512MiB, workspaces: 3, upload_bytes: 10MiB, upload_entries: 500, disk: 1GiB}`)))
	if err != nil {
		t.Fatal(err)
	}
	q := c.Tenants[0].Quotas
	want := Quotas{Sessions: 10, Memory: 20 << 30, Pids: 10000, CPU: 2.5, Wall: 30 * time.Minute, Audit: 512 << 20,
		Workspaces: 3, Upload: UploadLimits{Bytes: 10 << 20, Entries: 500}, Disk: 1 << 30,
		Session: SessionLimits{Memory: 2 << 30, Pids: 1000, CPU: 0.25}, MCPIdle: 90 * time.Second, Pos: Pos{Line: 7, Col: 13}}
	if q != want {
		t.Errorf("got %+v; want %+v", q, want)
	}
	c, err = Parse("f.yaml", []byte(quotaTenant(`{sessions: 1000, cpu: 1}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tenants[0].Quotas.Session; got != (SessionLimits{Memory: (8 << 30) / 1000, Pids: 8, CPU: 0.01}) {
		t.Errorf("a share of 1000 sessions: got %+v; want 8GiB/1000, 8 pids, 0.01 CPU (the least a sandbox can be held to)", got)
	}
	c, err = Parse("f.yaml", []byte(quotaTenant(`{sessions: 2, session_default: {memory: 1GiB, pids: 100, cpu: 1}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tenants[0].Quotas; got.Session != (SessionLimits{Memory: 1 << 30, Pids: 100, CPU: 1}) || got.Memory != 8<<30 {
		t.Errorf("session_default: got %+v", got)
	}
}

// TestQuotasRefuse: each bad quota is refused at its position, all of them at once.
func TestQuotasRefuse(t *testing.T) {
	for _, tc := range []struct {
		name, q string
		want    []string
	}{
		{"zero sessions", `{sessions: 0}`, []string{`f.yaml:7:24: quotas.sessions: 0 is out of range [1, 100000]`}},
		{"negative pids", `{pids: -5}`, []string{`f.yaml:7:20: quotas.pids: -5 is out of range [1, 2147483647]`}},
		{"zero cpu", `{cpu: 0}`, []string{`f.yaml:7:19: quotas.cpu: want a positive number of CPUs (e.g. 2 or 0.5), got "0"`}},
		{"string cpu", `{cpu: "2"}`, []string{`f.yaml:7:19: quotas.cpu: want a positive number of CPUs (e.g. 2 or 0.5), got "2"`}},
		{"tiny cpu", `{cpu: 0.001}`, []string{`f.yaml:7:19: quotas.cpu: 0.001 is less than the least a sandbox can be held to (0.01)`}},
		{"bad size", `{memory: lots}`, []string{`f.yaml:7:22: quotas.memory: invalid size "lots" (want e.g. 512MiB, 2GiB)`}},
		{"no workspaces", `{workspaces: 0}`, []string{`f.yaml:7:26: quotas.workspaces: 0 is out of range [1, 100000]`}},
		{"zero size", `{audit: 0}`, []string{`f.yaml:7:21: quotas.audit: size "0" is out of range`}},
		{"tiny memory", `{memory: 1MiB}`, []string{`f.yaml:7:13: quotas.memory: 1048576 bytes is too small to start any session (minimum 4MiB)`}},
		{"bad wall", `{wall: forever}`, []string{`f.yaml:7:20: quotas.wall: invalid duration "forever" (want e.g. 30m, 2h, 8h)`}},
		{"negative wall", `{wall: -1h}`, []string{`f.yaml:7:20: quotas.wall: -1h is out of range [1s, 720h0m0s]`}},
		{"long mcp_idle", `{mcp_idle: 48h}`, []string{`f.yaml:7:24: quotas.mcp_idle: 48h is out of range [1s, 24h0m0s]`}},
		{"unknown key", `{disks: 1GiB}`, []string{`f.yaml:7:14: quotas: unknown key "disks" (known: sessions, memory, pids, cpu, wall, mcp_idle, audit, session_default, workspaces, disk, upload_bytes, upload_entries)`}},
		{"disk too small", `{disk: 1MiB}`, []string{`f.yaml:7:20: quotas.disk: 1048576 bytes is too small for a tenant's file system (minimum 32MiB), or say host`}},
		{"disk not a size", `{disk: none}`, []string{`f.yaml:7:20: quotas.disk: invalid size "none" (want e.g. 512MiB, 2GiB)`}},
		{"default over quota", `{cpu: 1, session_default: {cpu: 2}}`, []string{
			`f.yaml:7:39: quotas.session_default.cpu: 2 is more than the tenant's whole quota (1): no session with the default could start`}},
		{"default too small", `{session_default: {memory: 1MiB}}`, []string{
			`f.yaml:7:31: quotas.session_default.memory: 1048576 bytes is too small to start a session (minimum 4MiB)`}},
		{"several at once", `{sessions: x, wall: 0s}`, []string{
			`f.yaml:7:24: quotas.sessions: want an integer, got "x"`,
			`f.yaml:7:33: quotas.wall: 0s is out of range [1s, 720h0m0s]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(quotaTenant(tc.q)))
			if err == nil {
				t.Fatal("accepted; want refused")
			}
			if got := err.Error(); got != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestSessionDefaultsFitTheQuota: the per-session defaults of N sessions fit the quota,
// CPU counted in thousandths as the ledger counts it (2 CPUs over 3 sessions is 0.666,
// not 0.667: three of those were 2.001, and a pool of 2 plus one claim never refilled).
func TestSessionDefaultsFitTheQuota(t *testing.T) {
	c, err := Parse("c.yaml", []byte("version: 1\nlisten: {unix: {path: /run/c.sock}}\ntenants:\n  - name: a\n    root: /srv/a\n    credentials: [{name: c, roles: [agent], uid: 1000}]\n    quotas: {sessions: 3, cpu: 2, memory: 1GiB, pids: 100}\n"))
	if err != nil {
		t.Fatal(err)
	}
	q := c.Tenants[0].Quotas
	if milli := int64(math.Ceil(q.Session.CPU*1000 - 1e-9)); milli*int64(q.Sessions) > int64(q.CPU*1000) {
		t.Errorf("session default cpu %v x %d sessions > quota %v", q.Session.CPU, q.Sessions, q.CPU)
	}
	if q.Session.Memory*int64(q.Sessions) > q.Memory || q.Session.Pids*int64(q.Sessions) > q.Pids {
		t.Errorf("session defaults %+v x %d > quotas %+v", q.Session, q.Sessions, q)
	}
}
