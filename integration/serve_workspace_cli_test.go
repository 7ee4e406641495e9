package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeClientWorkspaces: `cordon --host … workspace` fills a server workspace from
// a directory here (push), a session works in it, and its content comes back into a
// new directory here (pull), links as links; ls lists it and rm deletes it. A push into
// a workspace that is not empty, or a pull into a directory that is not, is refused
// and changes nothing; without --host the commands refuse to run.
func TestServeClientWorkspaces(t *testing.T) {
	s := startServe(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	mustWrite(t, caFile, string(s.ca.pem))
	cli := remoteCLI{t: t, env: cleanEnv()}.with("CORDON_HOST=https://"+s.addr, "CORDON_TLS_CA="+caFile, "CORDON_TOKEN="+s.tokens["acme"])

	src := filepath.Join(dir, "src")
	mustWrite(t, filepath.Join(src, "sub", "a.txt"), "from here\n")
	if err := os.Symlink("sub/a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := cli.run("workspace", "push", "pushed", src); code != 0 || out != "pushed\n" {
		t.Fatalf("workspace push: %d %q %q", code, out, stderr)
	}
	if _, stderr, code := cli.run("workspace", "push", "pushed", src); code == 0 || !strings.Contains(stderr, "not empty") {
		t.Errorf("a push into a workspace that is not empty: %d %q; want refused", code, stderr)
	}
	id, stderr, code := cli.run("session", "start", "--workspace", "pushed", "--backend", "bwrap")
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("session start --workspace pushed: %d %q", code, stderr)
	}
	if out, stderr, code := cli.run("exec", id, "--", "sh", "-c", "cat link && echo made > there.txt"); code != 0 || out != "from here\n" {
		t.Errorf("exec in the pushed workspace: %d %q %q", code, out, stderr)
	}
	if out, _, code := cli.run("workspace", "ls"); code != 0 || !strings.Contains(out, "pushed") || !strings.Contains(out, id) {
		t.Errorf("workspace ls with a session in it: %d %q", code, out)
	}
	if _, stderr, code := cli.run("session", "stop", id); code != 0 {
		t.Fatalf("session stop: %d %q", code, stderr)
	}

	dst := filepath.Join(dir, "dst")
	if out, stderr, code := cli.run("workspace", "pull", "pushed", dst); code != 0 || !strings.HasPrefix(out, dst+": ") {
		t.Fatalf("workspace pull: %d %q %q", code, out, stderr)
	}
	for name, want := range map[string]string{"sub/a.txt": "from here\n", "there.txt": "made\n"} {
		if got, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(got) != want {
			t.Errorf("pulled %s: %q %v; want %q", name, got, err, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "sub/a.txt" {
		t.Errorf("pulled link: %q %v; want a link to sub/a.txt", target, err)
	}
	if _, stderr, code := cli.run("workspace", "pull", "pushed", dst); code != 2 || !strings.Contains(stderr, "not an empty directory") {
		t.Errorf("a pull into a directory that is not empty: %d %q; want 2", code, stderr)
	}
	if _, stderr, code := cli.run("workspace", "pull", "nope", filepath.Join(dir, "none")); code == 0 {
		t.Errorf("a pull of a workspace that does not exist: %d %q; want refused", code, stderr)
	} else if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Errorf("a refused pull left its directory: %v", err)
	}

	if out, stderr, code := cli.run("workspace", "rm", "pushed"); code != 0 || out != "pushed\n" {
		t.Errorf("workspace rm: %d %q %q", code, out, stderr)
	}
	if out, _, code := cli.run("workspace", "ls"); code != 0 || strings.Contains(out, "pushed") {
		t.Errorf("workspace ls after rm: %d %q", code, out)
	}
	if _, stderr, code := (remoteCLI{t: t, env: cleanEnv()}).run("workspace", "ls"); code != 2 || !strings.Contains(stderr, "needs --host") {
		t.Errorf("workspace ls without a host: %d %q; want 2", code, stderr)
	}
}
