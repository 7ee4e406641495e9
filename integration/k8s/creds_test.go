//go:build k8s

package k8s

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// A session's credential files travel in process 1's spec, over the channel, and are
// written into the Pod's memory volume for them before any command runs: a command
// reads them (mode 0400) but cannot change them or add to them, and the Pod's spec
// holds none of their values. A file name that is not a plain name, or another
// directory, refuses the attach: process 1 exits, no command runs.
func TestPodCredentialFiles(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns, plan, cfg := sessionSetup(ctx, t, cs)
	const secret = "cordon-test-credential-6f1d"

	t.Run("delivered", func(t *testing.T) {
		p, s := startPlaced(ctx, t, cs, plan, cfg)
		spec := podspec.InitSpec(plan, cfg, podEnv)
		spec.FilesDir, spec.Files = paths.SandboxSecrets, []wire.File{{Name: "token", Value: secret}}
		ch, err := p.Attach(ctx, rc, s, spec)
		if err != nil {
			t.Fatalf("attaching: %v%s", err, describe(ctx, cs, ns, podspec.Name(s.ID)))
		}
		defer ch.Close()
		r := &runner{t: t, ch: ch, dir: plan.Workspace}
		script := `d=` + paths.SandboxSecrets + `
echo "value=$(cat $d/token)"
echo "mode=$(stat -c %a $d/token)"
echo x >>$d/token 2>/dev/null && echo append=done || echo append=refused
rm -f $d/token 2>/dev/null; [ -e $d/token ] && echo remove=refused || echo remove=done
touch $d/other 2>/dev/null && echo create=done || echo create=refused`
		code, out, stderr := r.run("", "/bin/sh", "-c", script)
		for _, want := range []string{"value=" + secret + "\n", "mode=400\n", "append=refused\n", "remove=refused\n", "create=refused\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("want %q; a command printed (status %d):\n%s%s", want, code, out, stderr)
			}
		}
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, podspec.Name(s.ID), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := pod.Marshal(); strings.Contains(string(data), secret) {
			t.Errorf("the Pod's object holds the credential's value")
		}
	})
	for _, bad := range []struct {
		name, dir, file, why string
	}{
		{"not a plain name", paths.SandboxSecrets, "../cordon-escape", "not a plain name"},
		{"another directory", "/tmp", "token", "credential files go in"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			p, s := startPlaced(ctx, t, cs, plan, cfg)
			spec := podspec.InitSpec(plan, cfg, podEnv)
			spec.FilesDir, spec.Files = bad.dir, []wire.File{{Name: bad.file, Value: secret}}
			ch, err := p.Attach(ctx, rc, s, spec)
			if err == nil {
				ch.Close()
				t.Fatalf("attached with files %q in %s, want a refusal", bad.file, bad.dir)
			}
			if !strings.Contains(err.Error(), bad.why) {
				t.Errorf("refused with %v, want it to say %q", err, bad.why)
			}
		})
	}
}
