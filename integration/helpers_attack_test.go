package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	attackOnce sync.Once
	attackBin  string
	attackErr  error
)

// removeAttacker removes the attack program attacker built, once the tests are done.
func removeAttacker() {
	if attackBin != "" {
		os.RemoveAll(filepath.Dir(attackBin))
	}
}

// attacker copies the static attack program (testdata/attack) into w's workspace and
// returns its path there.
func (w *world) attacker() string {
	w.t.Helper()
	attackOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cordon-attack-")
		if err != nil {
			attackErr = err
			return
		}
		attackBin = filepath.Join(dir, "attack")
		_, file, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", attackBin, "./testdata/attack")
		cmd.Dir = filepath.Dir(file)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			attackErr = &buildError{string(out), err}
		}
	})
	if attackErr != nil {
		w.t.Fatalf("building the attack program: %v", attackErr)
	}
	data, err := os.ReadFile(attackBin)
	if err != nil {
		w.t.Fatal(err)
	}
	p := filepath.Join(w.ws, "attack")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		w.t.Fatal(err)
	}
	return p
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// attack runs the attack program's mode in a one-command run and fails the test on
// any attempt that got through.
func (w *world) attack(mode string) string {
	w.t.Helper()
	w.attacker()
	r := w.cordon("", "run", "--", "./attack", mode)
	if r.code != 0 {
		w.t.Fatalf("attack %s: %v", mode, r)
	}
	assertRefused(w.t, mode, r.stdout)
	return r.stdout
}

func assertRefused(t *testing.T, mode, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, " ok") {
			t.Errorf("attack %s got through: %s\n%s", mode, line, out)
		}
	}
}
