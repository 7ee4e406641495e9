package monitor

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
)

func testProfile() Profile {
	plan := &contract.Plan{
		Mounts: []contract.Mount{
			{Path: "/usr", Access: contract.ReadOnly, Why: "@system"},
			{Path: "/etc", Access: contract.ReadOnly, Why: "@system"},
			{Path: "/etc/shadow", Access: contract.Hidden, Why: "@system never shows host secrets"},
			{Path: "/home/u/proj", Access: contract.ReadWrite, Why: "workspace"},
			{Path: "/home/u/proj/.git", Access: contract.ReadOnly, Why: "deny_write"},
			{Path: "/tmp", Access: contract.ReadWrite, Why: "private /tmp"},
		},
		Links:   []contract.Link{{Path: "/bin", Target: "usr/bin"}},
		Monitor: contract.MonitorPlan{Exec: []string{"python3", "/opt/tools/*"}},
	}
	return FromPlan(plan)
}

func TestCheckPath(t *testing.T) {
	p := testProfile()
	for _, c := range []struct {
		name, path string
		write      bool
		rule       Rule
		reason     string
	}{
		{"readable", "/usr/lib/libc.so", false, "", ""},
		{"hidden", "/etc/shadow", false, RuleRead, "read of a hidden path (/etc/shadow: @system never shows host secrets)"},
		{"outside", "/root/.ssh/id_rsa", false, RuleRead, "read outside the readable set"},
		{"above a mount", "/home/u", false, "", ""},
		{"root dir", "/", false, "", ""},
		{"write above a mount", "/home/u/x", true, RuleWrite, "write outside the writable set"},
		{"write workspace", "/home/u/proj/main.go", true, "", ""},
		{"write .git", "/home/u/proj/.git/config", true, RuleWrite, "write to a read-only path (/home/u/proj/.git: deny_write)"},
		{"write read-only", "/usr/bin/x", true, RuleWrite, "write to a read-only path (/usr: @system)"},
		{"prefix is not a parent", "/usrx/y", false, RuleRead, "read outside the readable set"},
		{"dev null", "/dev/null", true, "", ""},
		{"proc self", "/proc/self/status", false, "", ""},
		{"kcore", "/proc/kcore", false, RuleRead, "read of a hidden path (/proc/kcore: kernel memory)"},
		{"proc write", "/proc/sys/kernel/core_pattern", true, RuleWrite, "write to a read-only path (/proc: sandbox /proc)"},
		{"runtime probe", "/sys/fs/cgroup/cpu.max", false, "", ""},
		{"other sys", "/sys/kernel/debug/x", false, RuleRead, "read outside the readable set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rule, category, reason := p.checkPath(c.path, c.write)
			if rule != c.rule || reason != c.reason || !strings.HasPrefix(reason, category) {
				t.Errorf("checkPath(%q, %v) = %q, %q; want %q, %q", c.path, c.write, rule, reason, c.rule, c.reason)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	p := testProfile()
	for in, want := range map[string]string{
		"/bin/sh":            "/usr/bin/sh",
		"/bin":               "/usr/bin",
		"/binx":              "/binx",
		"/usr/../etc/shadow": "/etc/shadow",
		"/tmp//a/./b":        "/tmp/a/b",
	} {
		if got := p.resolve(in); got != want {
			t.Errorf("resolve(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestFromPlan(t *testing.T) {
	p := testProfile()
	if len(p.Connect) != 1 || p.Connect[0] != "127.0.0.1:3128" {
		t.Errorf("Connect = %q; want the proxy only", p.Connect)
	}
	gated := FromPlan(&contract.Plan{Gates: []contract.Gate{{Name: "push"}}})
	if len(gated.Connect) != 2 || gated.Connect[1] != "unix:/run/cordon/gate.sock" {
		t.Errorf("Connect with gates = %q; want the proxy and the gate socket", gated.Connect)
	}
	if len(p.Exec) != 2 || len(p.Paths) != len(sandboxPaths)+6 || len(p.Links) != len(sandboxLinks)+1 {
		t.Errorf("FromPlan = %+v", p)
	}
}

func rec(sc Syscall, args [6]uint64, flags uint16, strs ...string) *Record {
	r := &Record{PID: 42, Comm: "x", Syscall: sc, Args: args, Flags: flags}
	for i, s := range strs {
		r.Str[i] = []byte(s)
	}
	return r
}

func sockaddr4(ip [4]byte, port uint16) string {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint16(b, afInet)
	binary.BigEndian.PutUint16(b[2:], port)
	copy(b[4:], ip[:])
	return string(b)
}

func sockaddr6(ip [16]byte, port uint16) string {
	b := make([]byte, 28)
	binary.NativeEndian.PutUint16(b, afInet6)
	binary.BigEndian.PutUint16(b[2:], port)
	copy(b[8:], ip[:])
	return string(b)
}

func sockaddrUnix(path string) string {
	b := make([]byte, 2, 110)
	binary.NativeEndian.PutUint16(b, afUnix)
	return string(append(b, path...)) + "\x00"
}

func TestCheck(t *testing.T) {
	python := fileID{Dev: 0xfe00, Ino: 77}
	c := checker{prof: testProfile(), risky: map[fileID][]string{python: {"python3", "python3.11"}, {Dev: 1, Ino: 2}: {"sh", "dash"}}}
	const rdonly, wronlyCreat = 0, 0o101
	loopback6 := [16]byte{15: 1}
	for _, c2 := range []struct {
		name   string
		r      *Record
		rule   Rule
		reason string // substring
		unres  bool
	}{
		{"open readable", rec(SysOpenat, [6]uint64{rdonly}, 0, "/etc/hostname"), "", "", false},
		{"open shadow", rec(SysOpenat, [6]uint64{rdonly}, 0, "/etc/shadow"), RuleRead, "hidden", false},
		{"open /dev/core", rec(SysOpenat, [6]uint64{rdonly}, 0, "/dev/core"), RuleRead, "hidden", false},
		{"open relative", rec(SysOpenat, [6]uint64{rdonly}, flagRelative, "shadow", "/etc"), RuleRead, "hidden", false},
		{"open relative dotdot", rec(SysOpenat, [6]uint64{rdonly}, flagRelative, "../etc/shadow", "/usr"), RuleRead, "hidden", false},
		{"openat2 in root", rec(SysOpenat2, [6]uint64{wronlyCreat, 3, 0, 0x10}, flagRelative, "/tmp/x", "/etc"), RuleWrite, "read-only", false},
		{"openat2 in root dotdot", rec(SysOpenat2, [6]uint64{wronlyCreat, 3, 0, 0x10}, flagRelative, "../../tmp/x", "/etc"), RuleWrite, "read-only", false},
		{"open relative unresolved", rec(SysOpenat, [6]uint64{rdonly}, 0, "shadow"), "", "", true},
		{"open fault", rec(SysOpenat, [6]uint64{rdonly}, flagFault), RuleSyscall, "at entry nor at exit", false},
		{"openat2 flags fault", rec(SysOpenat2, [6]uint64{rdonly}, flagFault, "/etc/passwd"), RuleSyscall, "at entry nor at exit", false},
		{"creat outside", rec(SysCreat, [6]uint64{wronlyCreat}, 0, "/opt/x"), RuleWrite, "writable", false},
		{"truncate read-only", rec(SysOpenat2, [6]uint64{0o1000}, 0, "/etc/passwd"), RuleWrite, "read-only", false},
		{"exec allowed by name", rec(SysExecve, [6]uint64{77, 0xfe00 << 12, 1}, 0, "/usr/bin/python3", "python3\x00-c\x00pass\x00", "/usr/bin/python3.11"), "", "", false},
		{"exec allowed by glob", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/opt/tools/bash", "bash\x00", "/opt/tools/bash"), "", "", false},
		{"exec plain program", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/usr/bin/git", "git\x00status\x00", "/usr/bin/git"), "", "", false},
		{"exec shell", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/bin/bash", "bash\x00-c\x00x\x00", "/usr/bin/bash"), RuleExec, `shell "bash"`, false},
		{"exec relay", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/usr/bin/nc", "nc\x00-l\x00", "/usr/bin/nc.openbsd"), RuleExec, `network relay "nc.openbsd"`, false},
		{"exec renamed shell", rec(SysExecve, [6]uint64{2, 1 << 20, 1}, 0, "/tmp/ls", "ls\x00", "/usr/bin/dash"), RuleExec, `shell "dash"`, false},
		{"exec renamed interpreter by inode", rec(SysExecve, [6]uint64{77, 0xfe00 << 12, 1}, 0, "/tmp/x", "x\x00", "/tmp/x"), "", "", false},
		{"exec link named after an allowed program", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/tmp/python3", "python3\x00", "/usr/bin/perl"), RuleExec, `interpreter "perl"`, false},
		{"exec shell linked as an allowed program", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/home/u/proj/python3", "python3\x00", "/usr/bin/bash"), RuleExec, `shell "bash"`, false},
		{"exec link through another process's cwd", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/proc/77/cwd/python3", "python3\x00", "/usr/bin/perl"), RuleExec, `interpreter "perl"`, false},
		{"exec link through a descriptor", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/proc/77/task/78/fd/4/python3", "python3\x00", "/usr/bin/perl"), RuleExec, `interpreter "perl"`, false},
		{"exec venv link to another version", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/home/u/proj/.venv/bin/python3", "python3\x00", "/usr/local/bin/python3.12"), "", "", false},
		{"exec read-only link", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/usr/bin/python3", "python3\x00", "/usr/lib/pypy/pypy"), "", "", false},
		{"exec dynamic loader", rec(SysExecve, [6]uint64{5, 0, 1}, 0, "/lib64/ld-linux-x86-64.so.2", "ld-linux-x86-64.so.2\x00/usr/bin/python3\x00", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"), RuleExec, `dynamic loader "ld-linux-x86-64.so.2"`, false},
		{"exec memfd", rec(SysExecveat, [6]uint64{9, 0, 0}, 0, "/dev/fd/3", "x\x00", "/memfd:x (deleted)"), RuleExec, "no name", false},
		{"connect proxy", rec(SysConnect, [6]uint64{}, 0, sockaddr4([4]byte{127, 0, 0, 1}, 3128)), "", "", false},
		{"connect the bridge's old socket", rec(SysConnect, [6]uint64{}, 0, sockaddrUnix("/run/cordon/egress.sock")), RuleConnect, "unix:/run/cordon/egress.sock", false},
		{"connect loopback", rec(SysConnect, [6]uint64{}, 0, sockaddr4([4]byte{127, 0, 0, 1}, 8080)), RuleConnect, "127.0.0.1:8080", false},
		{"connect v6", rec(SysConnect, [6]uint64{}, 0, sockaddr6(loopback6, 3128)), RuleConnect, "[::1]:3128", false},
		{"connect unix", rec(SysConnect, [6]uint64{}, 0, sockaddrUnix("/var/run/docker.sock")), RuleConnect, "unix:/var/run/docker.sock", false},
		{"connect abstract", rec(SysConnect, [6]uint64{}, 0, sockaddrUnix("\x00x")), RuleConnect, "unix:@x", false},
		{"connect unspec", rec(SysConnect, [6]uint64{}, 0, "\x00\x00"), "", "", false},
		{"connect fault", rec(SysConnect, [6]uint64{3, 16}, flagFault), RuleSyscall, "at entry nor at exit", false},
		{"connect gate socket, no gates", rec(SysConnect, [6]uint64{}, 0, sockaddrUnix("/run/cordon/gate.sock")), RuleConnect, "the only allowed destination is the egress proxy", false},
		{"open process 1's spec", rec(SysOpenat, [6]uint64{rdonly}, 0, "/run/cordon/spec.json"), RuleRead, "process 1's own", false},
		{"open process 1's env pipe", rec(SysOpenat, [6]uint64{rdonly}, 0, "/run/cordon/env"), RuleRead, "process 1's own", false},
		{"write process 1's status pipe", rec(SysOpenat, [6]uint64{1}, 0, "/run/cordon/status"), RuleWrite, "process 1's own", false},
		{"open cordon's binary", rec(SysOpenat, [6]uint64{rdonly}, 0, "/run/cordon/cordon"), "", "", false},
		{"ptrace", rec(SysPtrace, [6]uint64{16, 1}, 0), RuleSyscall, "tracing", false},
		{"unshare", rec(SysUnshare, [6]uint64{0x10000000}, 0), RuleSyscall, "namespaces", false},
	} {
		t.Run(c2.name, func(t *testing.T) {
			a, dev, unres := c.check(c2.r)
			if unres != c2.unres {
				t.Errorf("unresolved = %v; want %v", unres, c2.unres)
			}
			if dev != (c2.rule != "") || a.Rule != c2.rule || !strings.Contains(a.Reason, c2.reason) {
				t.Errorf("check = %v, %+v; want rule %q with reason containing %q", dev, a, c2.rule, c2.reason)
			}
		})
	}
}

func TestDetail(t *testing.T) {
	for _, c := range []struct {
		r    *Record
		want string
	}{
		{rec(SysPtrace, [6]uint64{16, 7}, 0), "request=PTRACE_ATTACH pid=7"},
		{rec(SysMount, [6]uint64{3: 0x1000}, 0, "none", "/mnt", "tmpfs"), `source="none" target="/mnt" fstype="tmpfs" flags=0x1000`},
		{rec(SysUnshare, [6]uint64{0x10020000 | 1}, 0), "flags=CLONE_NEWNS|CLONE_NEWUSER|0x1"},
		{rec(SysSetns, [6]uint64{3, 0x40000000}, 0), "fd=3 nstype=CLONE_NEWNET"},
	} {
		if got := detail(c.r); got != c.want {
			t.Errorf("detail(%s) = %q; want %q", c.r.Syscall, got, c.want)
		}
	}
}

func TestRisky(t *testing.T) {
	for name, want := range map[string]string{
		"sh": "shell", "bash": "shell", "ksh93": "shell", "python3": "interpreter", "python3.11": "interpreter",
		"perl5.36.0": "interpreter", "node": "interpreter", "nc": "network relay", "nc.openbsd": "network relay",
		"git": "", "go": "", "ls": "", "shred": "", "python-config": "",
		"ld-linux-x86-64.so.2": "dynamic loader", "ld-linux-aarch64.so.1": "dynamic loader",
		"ld-musl-x86_64.so.1": "dynamic loader", "ld-2.31.so": "dynamic loader", "ld.so": "dynamic loader",
		"ld64.so.2": "dynamic loader", "ld": "", "ld.bfd": "", "ld.lld": "", "ldd": "", "ldconfig": "",
	} {
		if got := Risky(name); got != want {
			t.Errorf("Risky(%q) = %q; want %q", name, got, want)
		}
	}
}

func TestAlertString(t *testing.T) {
	a := Alert{PID: 7, Comm: "cat", Syscall: "openat", Path: "/etc/shadow", Reason: "read of a hidden path"}
	if got, want := a.String(), "openat (pid 7, cat, /etc/shadow): read of a hidden path"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

func TestDecodeRecord(t *testing.T) {
	b := make([]byte, headerLen+9)
	le := binary.NativeEndian
	le.PutUint64(b, 99)
	le.PutUint32(b[offPID:], 7)
	le.PutUint16(b[offSC:], uint16(SysMount))
	le.PutUint16(b[offLen:], 4)
	le.PutUint16(b[offLen+2:], 5)
	copy(b[offComm:], "mount\x00")
	copy(b[headerLen:], "none/mnt/")
	r, err := decodeRecord(b)
	if err != nil || r.Cgroup != 99 || r.PID != 7 || r.Syscall != SysMount || r.Comm != "mount" || string(r.Str[0]) != "none" || string(r.Str[1]) != "/mnt/" {
		t.Fatalf("decodeRecord = %+v, %v", r, err)
	}
	le.PutUint16(b[offLen+4:], 1)
	if _, err := decodeRecord(b); err == nil {
		t.Error("decodeRecord accepted strings longer than the record")
	}
	if _, err := decodeRecord(b[:10]); err == nil {
		t.Error("decodeRecord accepted a short record")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(make([]byte, headerLen+8))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		c := checker{prof: testProfile()}
		c.check(&r) // must not panic
	})
}

// TestConnectControlSocket: process 1 is not watched (Options.Nested), so a connect to
// the control socket the checker sees is the workload's, however the path is spelt, and
// has a category of its own; other unix sockets keep the general one.
func TestConnectControlSocket(t *testing.T) {
	c := checker{prof: testProfile()}
	for _, tc := range []struct{ name, path, category string }{
		{"as process 1 dials it", "/run/cordon/control.sock", CatConnectControl},
		{"unclean", "//run/./cordon/../cordon/control.sock", CatConnectControl},
		{"through the root link", "/proc/self/root/run/cordon/control.sock", CatConnectControl},
		{"through another process's root link", "/proc/1/root/run/cordon/control.sock", CatConnectControl},
		{"a sibling", "/run/cordon/control.sock2", CatConnect},
		{"relative (its directory is not known)", "control.sock", CatConnect},
		{"abstract of the same name", "\x00/run/cordon/control.sock", CatConnect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, dev, _ := c.check(rec(SysConnect, [6]uint64{}, 0, sockaddrUnix(tc.path)))
			if !dev || a.Rule != RuleConnect || a.Category != tc.category {
				t.Fatalf("check = %v, rule %q, category %q; want rule connect, category %q", dev, a.Rule, a.Category, tc.category)
			}
			if tc.category == CatConnectControl && !strings.Contains(a.Reason, "only process 1 dials it") {
				t.Errorf("reason %q does not say whose socket it is", a.Reason)
			}
		})
	}
	gated := checker{prof: FromPlan(&contract.Plan{Gates: []contract.Gate{{Name: "push"}}})}
	if a, dev, _ := gated.check(rec(SysConnect, [6]uint64{}, 0, sockaddrUnix("/run/cordon/gate.sock"))); dev {
		t.Errorf("with gates, a connect to the gate socket deviates: %+v", a)
	}
	if a, dev, _ := gated.check(rec(SysConnect, [6]uint64{}, 0, sockaddrUnix("/run/cordon/control.sock"))); !dev || a.Category != CatConnectControl {
		t.Errorf("with gates, the control socket: %v, %+v", dev, a)
	}
}
