// Package testutil holds helpers shared by cordon's tests: requirement checks that skip
// outside CI but fail under CI=true, and building the cordon binary once per package.
package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// InCI reports whether tests run under CI (CI=true), where nothing may be skipped for
// lack of a mechanism.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require skips the test (or fails it under CI) when ok is false.
func Require(t testing.TB, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("required under CI=true: %s", why)
	}
	t.Skipf("skipping: %s (CI=true makes this a failure)", why)
}

// RequireBwrap requires a working bwrap on Linux.
func RequireBwrap(t testing.TB) {
	t.Helper()
	Require(t, runtime.GOOS == "linux", "bwrap needs Linux")
	_, err := exec.LookPath("bwrap")
	Require(t, err == nil, "bwrap is not installed (apt-get install bubblewrap)")
}

// RequireRoot requires uid 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	Require(t, os.Geteuid() == 0, "needs root")
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Cordon builds cordon, cordon-engines, cordon-init and cordon-exec once per test
// binary (static, CGO_ENABLED=0) and returns the path of cordon; [CordonExec] is the
// path of cordon-exec beside it.
func Cordon(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cordon-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		_ = os.Chmod(dir, 0o755) // tests also run it as an unprivileged user
		buildPath = filepath.Join(dir, "cordon")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		// As `make build` lays them out: cordon without the container engine clients,
		// cordon-engines (the full build) that it hands container work to, and
		// cordon-init beside them, which runs use as process 1; cordon-exec, the small
		// client for cordon exec.
		for _, b := range []struct{ out, pkg, tags string }{
			{"cordon", "cordon", "noengines"}, {"cordon-engines", "cordon", ""}, {"cordon-init", "cordon-init", ""},
			{"cordon-exec", "cordon-exec", ""},
		} {
			cmd := exec.Command("go", "build", "-tags="+b.tags, "-o", filepath.Join(dir, b.out), "./cmd/"+b.pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{out: string(out), err: err}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("building cordon: %v", buildErr)
	}
	return buildPath
}

// Main runs a package's tests (call it from TestMain) and then removes the binaries
// [Cordon] built for them: each test binary builds its own (~120 MB), and a
// temporary directory left by every `go test` run fills /tmp. Each of after runs
// then, for what else the package's tests keep for the whole process.
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	if buildPath != "" {
		os.RemoveAll(filepath.Dir(buildPath))
	}
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// CordonExec builds the binaries as [Cordon] does and returns the path of cordon-exec.
func CordonExec(t testing.TB) string {
	t.Helper()
	return filepath.Join(filepath.Dir(Cordon(t)), "cordon-exec")
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// RandReader returns a deterministic stream of bytes for seed: test payloads that can
// be checked end to end with [SumOf].
func RandReader(seed uint64) io.Reader {
	return &chachaReader{r: rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16)})}
}

type chachaReader struct{ r *rand.ChaCha8 }

func (c *chachaReader) Read(b []byte) (int, error) { return c.r.Read(b) }

// SumOf returns the hex SHA-256 of n bytes of RandReader(seed).
func SumOf(n int64, seed uint64) string {
	h := sha256.New()
	io.CopyN(h, RandReader(seed), n)
	return hex.EncodeToString(h.Sum(nil))
}

// ProcessGone reports whether no process has the pid pid (a decimal string): /proc
// has no entry for it. What cannot be told (another error) is not gone.
func ProcessGone(pid string) bool {
	_, err := os.Stat("/proc/" + pid)
	return os.IsNotExist(err)
}

// Tree lists every path under dir (dir included), in the order a walk finds them
// (lexical): a test compares the trees before and after.
func Tree(t testing.TB, dir string) []string {
	t.Helper()
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return nil
	})
	return paths
}
