package kubernetes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
)

// TestPlacementFilesTrusted: the supervisor reads the placement config and the
// kubeconfig it is given only when nobody but their owner (cordon's user or root) can
// have changed them since the server checked them: a config in a directory anyone may
// write, or a kubeconfig its group may write, is refused, never used.
func TestPlacementFilesTrusted(t *testing.T) {
	dir := t.TempDir()
	cfg := "version: 1\nnamespace: tenant-a\nimage: img:1\ninitImage: cordon:1\n"
	kube := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
	write := func(p, data string, mode os.FileMode) string {
		t.Helper()
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodCfg := write(filepath.Join(dir, "p.yaml"), cfg, 0o644)
	goodKube := write(filepath.Join(dir, "kubeconfig"), kube, 0o600)
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(open, 0o777)
	for _, c := range []struct {
		name, cfg, kube string
		ok              bool
	}{
		{"both trusted", goodCfg, goodKube, true},
		{"a config anyone may swap", write(filepath.Join(open, "p.yaml"), cfg, 0o644), goodKube, false},
		{"a config its group may write", write(filepath.Join(dir, "g.yaml"), cfg, 0o664), goodKube, false},
		{"a kubeconfig anyone may swap", goodCfg, write(filepath.Join(open, "kubeconfig"), kube, 0o600), false},
		{"a kubeconfig its group may write", goodCfg, write(filepath.Join(dir, "gk"), kube, 0o660), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvConfig, c.cfg)
			t.Setenv(EnvKubeconfig, c.kube)
			_, rc, _, _, err := (&Backend{}).placement()
			if c.ok {
				if err != nil || rc == nil || rc.Host != "https://127.0.0.1:1" || rc.BearerToken != "t" {
					t.Fatalf("trusted files refused or misread: %v", err)
				}
				return
			}
			if !errors.Is(err, paths.ErrUnsafe) || !strings.Contains(err.Error(), "whoever can change it") {
				t.Fatalf("got %v; want a refusal saying the file is not safe", err)
			}
		})
	}
}
