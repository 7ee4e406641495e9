package kubernetes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
)

// Red team: the kubeconfig is read only when trusted (paths.ReadTrusted), but the
// files it names were not checked at all: client-go reads the token, the client key
// and certificate and the CA from wherever it says, and runs its exec credential
// plugin from there (or from the first directory of $PATH holding its name). One in
// a directory anyone may write gives that anyone the supervisor's identity on the
// cluster (a token or key of their choosing), a man in the middle's CA, or a command
// run as the supervisor (the plugin). Each such kubeconfig must be refused as unsafe,
// as the kubeconfig itself would be; the same one with its files in a trusted
// directory is taken, its bare plugin name resolved to the path checked.
func TestRedTeamKubeconfigReferencedFiles(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(tmp, "good")
	open := filepath.Join(tmp, "open") // anyone may write here
	for _, d := range []string{good, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{good, open} {
		for name, mode := range map[string]os.FileMode{"token": 0o600, "client.crt": 0o600, "client.key": 0o600, "ca.crt": 0o600, "get-token": 0o755} {
			if err := os.WriteFile(filepath.Join(d, name), []byte("x\n"), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	const head = "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
	cluster := func(ca string) string {
		if ca == "" {
			return "clusters:\n- name: k\n  cluster: {server: \"https://127.0.0.1:6443\", insecure-skip-tls-verify: true}\n"
		}
		return fmt.Sprintf("clusters:\n- name: k\n  cluster: {server: \"https://127.0.0.1:6443\", certificate-authority: %q}\n", ca)
	}
	write := func(t *testing.T, body string) string {
		t.Helper()
		p := filepath.Join(good, "kubeconfig")
		if err := os.WriteFile(p, []byte(head+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exec := func(cmd string) string {
		return fmt.Sprintf("users:\n- name: u\n  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, interactiveMode: Never}\n", cmd)
	}
	cases := []struct {
		name, body string
		path       string // $PATH, when set
	}{
		{"token-file", cluster("") + "users:\n- name: u\n  user: {tokenFile: DIR/token}\n", ""},
		{"client-key", cluster("") + "users:\n- name: u\n  user: {client-certificate: DIR/client.crt, client-key: DIR/client.key}\n", ""},
		{"certificate-authority", cluster("DIR/ca.crt") + "users:\n- name: u\n  user: {token: t}\n", ""},
		{"exec plugin by path", cluster("") + exec("DIR/get-token"), ""},
		{"exec plugin on PATH", cluster("") + exec("get-token"), "DIR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, d := range []string{good, open} {
				if c.path != "" {
					t.Setenv("PATH", strings.ReplaceAll(c.path, "DIR", d))
				}
				_, err := kubeconfig(write(t, strings.ReplaceAll(c.body, "DIR", d)))
				switch {
				case d == good && err != nil:
					t.Errorf("its files in a trusted directory: %v", err)
				case d == open && err == nil:
					t.Errorf("a kubeconfig whose %s is in a directory anyone may write was taken", c.name)
				case d == open && !errors.Is(err, paths.ErrUnsafe):
					t.Errorf("its files in a directory anyone may write: %v, want an unsafe error", err)
				}
			}
		})
	}
}

// Red team: with no kubeconfig named (a tenant without `kubeconfig:`, cordon run or
// doctor without --kubeconfig, outside a Pod), the client config came from kubectl's
// rules ($KUBECONFIG's files, else ~/.kube/config) read with no check at all, though
// the supervisor inherits cordon serve's environment. Those files, and what they name,
// must pass the checks a named kubeconfig passes.
func TestRedTeamKubectlRulesUnchecked(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	good, open := filepath.Join(tmp, "good"), filepath.Join(tmp, "open")
	for _, d := range []string{good, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "token"), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	kc := func(dir, tokenDir string) string {
		p := filepath.Join(dir, "config")
		body := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n" +
			"clusters:\n- name: k\n  cluster: {server: \"https://127.0.0.1:6443\", insecure-skip-tls-verify: true}\n" +
			"users:\n- name: u\n  user: {tokenFile: " + filepath.Join(tokenDir, "token") + "}\n"
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("KUBECONFIG", kc(good, good))
	if _, err := RESTConfig(""); err != nil {
		t.Fatalf("a trusted $KUBECONFIG: %v", err)
	}
	t.Setenv("KUBECONFIG", kc(good, open))
	if _, err := RESTConfig(""); err == nil {
		t.Error("a $KUBECONFIG whose token file is in a directory anyone may write was taken")
	}
	t.Setenv("KUBECONFIG", kc(open, good))
	if _, err := RESTConfig(""); err == nil {
		t.Error("a $KUBECONFIG in a directory anyone may write was taken")
	}
	t.Setenv("KUBECONFIG", kc(good, good)+string(filepath.ListSeparator)+kc(open, good))
	if _, err := RESTConfig(""); err == nil {
		t.Error("a $KUBECONFIG list with a file in a directory anyone may write was taken")
	}
}
