package admit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostPathsOutsideRefused: a tenant's contract naming a host path or a host
// program outside its workspace is refused at that position, without being compiled
// (a path that does not exist is reported as outside, not as missing: the tenant
// learns nothing about the host).
func TestHostPathsOutsideRefused(t *testing.T) {
	ws, root := workspace(t)
	if err := os.Symlink("/etc", filepath.Join(ws, "etc-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(ws, "nowhere"), filepath.Join(ws, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(ws, "src", "up")); err != nil {
		t.Fatal(err)
	}
	sibling := filepath.Join(root, "w2")
	if err := os.Mkdir(sibling, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"workspace elsewhere", "version: 1\nworkspace: /etc\n", "request:contract:2:12: workspace: \"/etc\" is not this session's workspace"},
		{"workspace of another session", "version: 1\nworkspace: " + sibling + "\n", "request:contract:2:12: workspace: "},
		{"workspace relative", "version: 1\nworkspace: ..\n", "request:contract:2:12: workspace: "},
		{"readable absolute", "version: 1\nfilesystem: {readable: [/etc]}\n", `request:contract:2:25: filesystem.readable: "/etc" is an absolute path`},
		{"readable absent host path", "version: 1\nfilesystem: {readable: [/nonexistent/secret]}\n", `filesystem.readable: "/nonexistent/secret" is an absolute path`},
		{"readable absolute in the workspace", "version: 1\nfilesystem: {readable: [" + ws + "/src]}\n", "is an absolute path"},
		{"readable up and out", "version: 1\nfilesystem: {readable: [../w2]}\n", `filesystem.readable: "../w2" is outside the workspace`},
		{"readable through a link", "version: 1\nfilesystem: {readable: [etc-link]}\n", `filesystem.readable: "etc-link" leads outside the workspace through a symbolic link`},
		{"readable through a deeper link", "version: 1\nfilesystem: {readable: [src/up/root]}\n", "leads outside the workspace"},
		{"readable through a dangling link", "version: 1\nfilesystem: {readable: [dangling/x]}\n", "cannot be resolved in the workspace"},
		{"writable home", "version: 1\nfilesystem: {writable: [\"~/.cache\"]}\n", `filesystem.writable: "~/.cache" names a home directory on the host`},
		{"writable absolute", "version: 1\nfilesystem: {writable: [/var/tmp]}\n", "filesystem.writable: \"/var/tmp\" is an absolute path"},
		{"widen a host socket", "version: 1\nfilesystem: {widen: [{path: /var/run/docker.sock, access: write, why: x}]}\n", `filesystem.widen: "/var/run/docker.sock"`},
		{"deny a host file (a placeholder on the host)", "version: 1\nfilesystem: {deny_write: [/etc/cordon-x]}\n", `filesystem.deny_write: "/etc/cordon-x" is outside the workspace`},
		{"deny a glob outside", "version: 1\nfilesystem: {deny_read: [\"../*/secret\"]}\n", `filesystem.deny_read: "../*/secret" is outside the workspace`},
		{"deny through a link", "version: 1\nfilesystem: {deny_read: [etc-link/shadow]}\n", "leads outside the workspace"},
		{"deny in home", "version: 1\nfilesystem: {deny_read: [\"~/.ssh\"]}\n", "names a home directory"},
		{"exec credential of its own", "version: 1\ncredentials: [{name: T, provider: exec, scope: {mint: [/bin/sh, -c, id], revoke: [\"true\"]}}]\n",
			"request:contract:2:15: credentials T: an exec credential runs scope.mint and scope.revoke on the host"},
		{"base's exec credential with another program", "version: 1\ncredentials: [{name: MINT, provider: exec, scope: {mint: [/tmp/evil], revoke: [\"true\"]}, deliver: gate}]\n" +
			"gates: [{name: push, run: [git, push], credential: MINT, timeout: 2m, why: release}]\n", "credentials MINT: an exec credential"},
		{"gate of its own", "version: 1\ngates: [{name: own, run: [/usr/bin/id], why: x}]\n", `request:contract:2:9: gates own: a gate runs ["/usr/bin/id"] on the host`},
		{"base's gate with another program", "version: 1\ngates: [{name: push, run: [git, push, --force], why: x}]\n", "gates push: a gate runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(testBase(t), []byte(tc.yaml), ws, root)
			r := refused(t, err)
			if len(r.Outside) == 0 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "does not exist") {
				t.Errorf("compiled before refusing (probes the host):\n%v", err)
			}
		})
	}
}

// wideBase lets the workspace be written and names a host path, an exec credential
// and a gate, so that a tenant's contract naming no more is a narrowing.
const wideBase = `version: 1
filesystem: {writable: ["."], readable: ["@system", /usr/share]}
credentials: [{name: MINT, provider: exec, scope: {mint: [/usr/local/bin/mint], revoke: ["true"]}, deliver: gate}]
gates: [{name: push, run: [git, push], credential: MINT, timeout: 2m, why: release}]
`

// TestHostPathsInsideAdmitted: what stays in the workspace, and what the base itself
// names, is admitted.
func TestHostPathsInsideAdmitted(t *testing.T) {
	ws, root := workspace(t)
	base, err := ParseBase("base.yaml", []byte(wideBase))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, yaml string }{
		{"the workspace key, equal", "version: 1\nworkspace: " + ws + "\n"},
		{"relative grants", "version: 1\nfilesystem: {writable: [src], readable: [\"@system\", src/vendor]}\n"},
		{"a relative path that leaves and comes back", "version: 1\nfilesystem: {writable: [../w1/src]}\n"},
		{"absolute denial in the workspace", "version: 1\nfilesystem: {writable: [src], deny_write: [" + ws + "/src/gen, Makefile]}\n"},
		{"glob denial", "version: 1\nfilesystem: {writable: [src], deny_read: [\"src/**/*.pem\", \"*.key\"]}\n"},
		{"a host path restated from the base", "version: 1\nfilesystem: {writable: [src], readable: [/usr/share]}\n"},
		{"the base's gate and exec credential restated", "version: 1\ncredentials: [{name: MINT, provider: exec, scope: {mint: [/usr/local/bin/mint], revoke: [\"true\"]}, deliver: gate}]\n" +
			"gates: [{name: push, run: [git, push], credential: MINT, timeout: 1m, why: mine}]\nfilesystem: {writable: [src]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Check(base, []byte(tc.yaml), ws, root); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// TestOutsideAndWiderTogether: a contract naming a host path is refused for that
// alone; its widenings are not computed, as it is not compiled.
func TestOutsideAndWiderTogether(t *testing.T) {
	ws, root := workspace(t)
	_, err := Check(testBase(t), []byte("version: 1\nfilesystem: {readable: [/etc], writable: [/root]}\nlimits: {memory: 64GiB}\n"), ws, root)
	r := refused(t, err)
	if len(r.Outside) != 2 || len(r.Widenings) != 0 || !strings.Contains(err.Error(), "it names 2 host paths outside the workspace") {
		t.Errorf("got:\n%v", err)
	}
}
