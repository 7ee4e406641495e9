package integration

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestContainerLifecycle(t *testing.T) {
	image := requireEngines(t)
	// /run is a file in this image: the container is created, but the runtime cannot
	// mount /run/cordon when it starts.
	importImage(t, "cordon-test/broken:3", testTar(t, "tmp/", "run"))
	// Docker makes an anonymous read-write volume for this image's VOLUME.
	importImage(t, "cordon-test/volume:1", testTar(t, "tmp/", "data/"), "VOLUME /data")
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		w := newWorld(t)
		w.imageContract(image, "")
		lifecycleFailures(t, w, backend, image)
		lifecycleStops(t, w, backend)
		lifecycleKills(t, w, backend, image)
	})
}

// lifecycleFailures runs a command that exits non-zero, then contracts whose image the
// engine cannot start (engine error) or that cordon's self-check refuses (docker only):
// each reports its code and leaves nothing behind.
func lifecycleFailures(t *testing.T, w *world, backend, image string) {
	t.Run("normal exit", func(t *testing.T) {
		if r := w.sh("echo out; echo err >&2; exit 3"); r.code != 3 || r.stdout != "out\n" || !strings.HasSuffix(r.stderr, "err\n") {
			t.Errorf("got %v", r)
		}
		assertNoLeftovers(t, backend)
	})
	t.Run("engine error", func(t *testing.T) {
		w.imageContract("cordon-test/broken:3", "")
		defer w.imageContract(image, "")
		r := w.sh("true")
		if r.code != 125 || !strings.Contains(r.stderr, "cordon: "+backend+": ") {
			t.Errorf("want 125 with the engine's reason, got %v", r)
		}
		assertNoLeftovers(t, backend)
	})
	if backend == "docker" {
		t.Run("self-check failure", func(t *testing.T) {
			w.imageContract("cordon-test/volume:1", "")
			defer w.imageContract(image, "")
			r := w.sh("true")
			if r.code != 125 {
				t.Errorf("want 125, got %v", r)
			}
			assertContains(t, "stderr", r.stderr, "/data is mounted read-write")
			assertNoLeftovers(t, backend)
		})
	}
}

// lifecycleStops ends runs by --timeout and by SIGINT and SIGTERM to cordon: no
// sandbox process survives, and nothing is left behind.
func lifecycleStops(t *testing.T, w *world, backend string) {
	t.Run("timeout", func(t *testing.T) {
		a, b, c := "sleep "+uniq("303"), "sleep "+uniq("304"), "sleep "+uniq("305")
		r := w.sh(a+" & setsid "+b+" & "+c, "--timeout", "1s")
		if r.code != 124 {
			t.Errorf("want 124, got %v", r)
		}
		for _, m := range []string{a, b, c} {
			if p := processesMatching(m); len(p) > 0 {
				t.Errorf("%q survived the timeout: %v", m, p)
			}
		}
		assertNoLeftovers(t, backend)
	})
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, marker := startSleeper(t, w, uniq("306"+strconv.Itoa(int(sig))))
			_ = cmd.Process.Signal(sig)
			err := cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(sig) {
				t.Errorf("want exit %d, got %v", 128+int(sig), err)
			}
			if p := processesMatching(marker); len(p) > 0 {
				t.Errorf("%q survived: %v", marker, p)
			}
			assertNoLeftovers(t, backend)
		})
	}
}

// lifecycleKills kill -9s cordon: what it leaves is removed by `cordon gc`, or by the
// next run's own gc.
func lifecycleKills(t *testing.T, w *world, backend, image string) {
	t.Run("kill -9, then gc", func(t *testing.T) {
		fifos := fifoDirs()
		killed := killCordon(t, w, backend, uniq("307"))
		r := w.cordon("", "gc")
		if r.code != 0 {
			t.Fatalf("gc: %v", r)
		}
		assertContains(t, "gc", r.stdout, "removed "+backend+" container of run "+killed)
		assertNoLeftovers(t, backend)
		if after := fifoDirs(); after > fifos {
			t.Errorf("containerd's stdio FIFO directories: %d before the run, %d after gc", fifos, after)
		}
	})
	t.Run("kill -9, then the next run", func(t *testing.T) {
		killCordon(t, w, backend, uniq("308"))
		// The next run is in another workspace: in the same one, runner.Run's own
		// gc removes the dead run's .git placeholder after the new plan was
		// compiled with it, and the mount source is gone (bwrap fails the same way).
		next := newWorld(t)
		next.useRunRoot(w.runRoot) // whose gc is to find the dead run
		next.imageContract(image, "")
		if r := next.sh("true"); r.code != 0 {
			t.Fatalf("next run: %v", r)
		}
		assertNoLeftovers(t, backend)
		_ = w.cordon("", "gc") // the dead run's directory and placeholder
	})
}
