package config

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/strictyaml"
	"github.com/cordonhq/cordon/server/disk"
)

// Quotas bound what one tenant may hold at once (tenants[].quotas). Every field is
// set: a key the config leaves out takes its default ([DefaultQuotas]; Session from
// the quotas divided by Sessions). Package server/quota enforces them.
type Quotas struct {
	Sessions int           // concurrent sessions
	Memory   int64         // bytes, the sum of the memory limits of its sessions
	Pids     int64         // the sum of the pids limits of its sessions
	CPU      float64       // CPUs, the sum of the cpu limits of its sessions
	Wall     time.Duration // the longest a session may live
	Audit    int64         // bytes its audit root may hold before new sessions are refused
	// Workspaces is how many workspaces its workspace root may hold (a new one past
	// it is refused: 429 until one is deleted).
	Workspaces int
	// Upload bounds one workspace's tar, uploaded or downloaded.
	Upload UploadLimits
	// Disk is the size in bytes of the tenant's own file system, mounted over its root
	// (package server/disk): all its sandboxes, stages and logs may write together.
	// 0 (quotas.disk: host) keeps the root on the host's file system, bounded only by
	// what the operator set up there.
	Disk int64
	// Session is what a session is charged, and held to, for a limit its contract
	// leaves to cordon's default.
	Session SessionLimits
	// MCPIdle ends an MCP session (and stops its session) no request named for that
	// long: what a client that vanishes holds (quotas.mcp_idle).
	MCPIdle time.Duration
	Pos     Pos
}

// UploadLimits bound a workspace's tar (quotas.upload_bytes, quotas.upload_entries):
// the sum of its regular files' sizes, and its entries.
type UploadLimits struct {
	Bytes   int64
	Entries int
}

// SessionLimits are one session's memory, pids and cpu limits.
type SessionLimits struct {
	Memory int64
	Pids   int64
	CPU    float64
}

// DefaultQuotas are the quotas of a tenant whose config sets none: a small share of
// a small host, so a tenant the operator forgot to bound cannot take the machine.
// Raise them per tenant.
// Each session gets an equal share by default (2GiB, 2048 pids, 0.5 CPU).
func DefaultQuotas() Quotas {
	q := Quotas{Sessions: 4, Memory: 8 << 30, Pids: 8192, CPU: 2, Wall: 2 * time.Hour, MCPIdle: 10 * time.Minute, Audit: 1 << 30,
		Workspaces: 64, Upload: UploadLimits{Bytes: 1 << 30, Entries: 100_000}, Disk: 16 << 30}
	q.Session = q.share()
	return q
}

// share is an equal share of q among q.Sessions sessions: the per-session default
// when quotas.session_default does not say.
func (q Quotas) share() SessionLimits {
	return SessionLimits{
		Memory: max(q.Memory/int64(q.Sessions), minMemory),
		Pids:   max(q.Pids/int64(q.Sessions), 1),
		// Rounded down to the thousandth the ledger counts in: Sessions sessions of the
		// default must fit the quota.
		CPU: max(math.Floor(q.CPU*1000/float64(q.Sessions))/1000, minCPU),
	}
}

// minMemory is the least memory a sandbox can start in (contract.Compile refuses less).
const minMemory = 4 << 20

// minCPU is the least CPU a cgroup can be held to (cpu.max: 1ms in a 100ms period).
const minCPU = 0.01

// maxWall bounds quotas.wall: a session is not a service.
const maxWall = 30 * 24 * time.Hour

// maxMCPIdle bounds quotas.mcp_idle: an idle MCP session holds a running sandbox.
const maxMCPIdle = 24 * time.Hour

// decodeQuotas reads tenants[].quotas into q, which holds the defaults.
func decodeQuotas(d *strictyaml.Decoder, n *yaml.Node, q *Quotas) {
	q.Pos = strictyaml.PosOf(n)
	var session *yaml.Node
	d.Mapping(n, "quotas",
		strictyaml.Field{Name: "sessions", Decode: func(v *yaml.Node) {
			if s, ok := d.Int(v, "quotas.sessions", 1, 100_000); ok {
				q.Sessions = int(s)
			}
		}},
		strictyaml.Field{Name: "memory", Decode: func(v *yaml.Node) { q.Memory = quotaSize(d, v, "quotas.memory", q.Memory) }},
		strictyaml.Field{Name: "pids", Decode: func(v *yaml.Node) { q.Pids = quotaInt(d, v, "quotas.pids", q.Pids) }},
		strictyaml.Field{Name: "cpu", Decode: func(v *yaml.Node) { q.CPU = quotaCPU(d, v, "quotas.cpu", q.CPU) }},
		strictyaml.Field{Name: "wall", Decode: func(v *yaml.Node) { q.Wall = quotaDuration(d, v, "quotas.wall", maxWall, q.Wall) }},
		strictyaml.Field{Name: "mcp_idle", Decode: func(v *yaml.Node) { q.MCPIdle = quotaDuration(d, v, "quotas.mcp_idle", maxMCPIdle, q.MCPIdle) }},
		strictyaml.Field{Name: "audit", Decode: func(v *yaml.Node) { q.Audit = quotaSize(d, v, "quotas.audit", q.Audit) }},
		strictyaml.Field{Name: "session_default", Decode: func(v *yaml.Node) { session = v }},
		strictyaml.Field{Name: "workspaces", Decode: func(v *yaml.Node) {
			if n, ok := d.Int(v, "quotas.workspaces", 1, 100_000); ok {
				q.Workspaces = int(n)
			}
		}},
		strictyaml.Field{Name: "disk", Decode: func(v *yaml.Node) { q.Disk = quotaDisk(d, v, q.Disk) }},
		strictyaml.Field{Name: "upload_bytes", Decode: func(v *yaml.Node) { q.Upload.Bytes = quotaSize(d, v, "quotas.upload_bytes", q.Upload.Bytes) }},
		strictyaml.Field{Name: "upload_entries", Decode: func(v *yaml.Node) {
			if n, ok := d.Int(v, "quotas.upload_entries", 1, 10_000_000); ok {
				q.Upload.Entries = int(n)
			}
		}},
	)
	q.Session = q.share()
	if session != nil {
		s := &q.Session
		d.Mapping(session, "quotas.session_default",
			strictyaml.Field{Name: "memory", Decode: func(v *yaml.Node) { s.Memory = quotaSize(d, v, "quotas.session_default.memory", s.Memory) }},
			strictyaml.Field{Name: "pids", Decode: func(v *yaml.Node) { s.Pids = quotaInt(d, v, "quotas.session_default.pids", s.Pids) }},
			strictyaml.Field{Name: "cpu", Decode: func(v *yaml.Node) { s.CPU = quotaCPU(d, v, "quotas.session_default.cpu", s.CPU) }},
		)
	}
	checkQuotas(d, n, session, q)
}

// checkQuotas refuses quotas no session could start in, and per-session defaults
// larger than the quota they are charged to.
func checkQuotas(d *strictyaml.Decoder, n, session *yaml.Node, q *Quotas) {
	if q.Memory < minMemory {
		d.At(n, "quotas.memory: %d bytes is too small to start any session (minimum 4MiB)", q.Memory)
		return
	}
	at := n
	if session != nil {
		at = session
	}
	s := q.Session
	if s.Memory < minMemory {
		d.At(at, "quotas.session_default.memory: %d bytes is too small to start a session (minimum 4MiB)", s.Memory)
	}
	for _, c := range []struct {
		name       string
		over       bool
		have, want string
	}{
		{"memory", s.Memory > q.Memory, fmt.Sprint(s.Memory), fmt.Sprint(q.Memory)},
		{"pids", s.Pids > q.Pids, fmt.Sprint(s.Pids), fmt.Sprint(q.Pids)},
		{"cpu", s.CPU > q.CPU, fmt.Sprint(s.CPU), fmt.Sprint(q.CPU)},
	} {
		if c.over {
			d.At(at, "quotas.session_default.%s: %s is more than the tenant's whole quota (%s): no session with the default could start", c.name, c.have, c.want)
		}
	}
}

// quotaDisk is quotas.disk: a size of at least [disk.MinSize], or host (0).
func quotaDisk(d *strictyaml.Decoder, n *yaml.Node, def int64) int64 {
	if s, ok := d.Scalar(n, "quotas.disk"); ok && s == "host" {
		return 0
	}
	v := quotaSize(d, n, "quotas.disk", def)
	if v < disk.MinSize {
		d.At(n, "quotas.disk: %d bytes is too small for a tenant's file system (minimum 32MiB), or say host", v)
		return def
	}
	return v
}

// quotaSize is n as a byte size ("4GiB", "512MiB", contract.ParseSize's forms); def
// when n is not one (reported).
func quotaSize(d *strictyaml.Decoder, n *yaml.Node, what string, def int64) int64 {
	s, ok := d.Scalar(n, what)
	if !ok {
		return def
	}
	v, err := contract.ParseSize(s)
	if err != nil {
		d.At(n, "%s: %v", what, err)
		return def
	}
	return v
}

func quotaInt(d *strictyaml.Decoder, n *yaml.Node, what string, def int64) int64 {
	if v, ok := d.Int(n, what, 1, math.MaxInt32); ok {
		return v
	}
	return def
}

func quotaCPU(d *strictyaml.Decoder, n *yaml.Node, what string, def float64) float64 {
	s, ok := d.Scalar(n, what)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || (n.Tag != "!!int" && n.Tag != "!!float") || !(f > 0) || f > 65536 {
		d.At(n, "%s: want a positive number of CPUs (e.g. 2 or 0.5), got %s", what, strictyaml.KindName(n))
		return def
	}
	if f < minCPU {
		d.At(n, "%s: %v is less than the least a sandbox can be held to (%v)", what, f, minCPU)
		return def
	}
	return f
}

// quotaDuration reads the duration what, 1s to most.
func quotaDuration(d *strictyaml.Decoder, n *yaml.Node, what string, most, def time.Duration) time.Duration {
	s, ok := d.Scalar(n, what)
	if !ok {
		return def
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.At(n, "%s: invalid duration %q (want e.g. 30m, 2h, 8h)", what, s)
	case v < time.Second || v > most:
		d.At(n, "%s: %s is out of range [1s, %s]", what, s, most)
	default:
		return v
	}
	return def
}
