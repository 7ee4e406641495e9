package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// doctorJSON is `cordon doctor --json`.
type doctorJSON struct {
	Version  int `json:"version"`
	Backends []struct {
		Backend string `json:"backend"`
		View    string `json:"view"`
		OK      bool   `json:"ok"`
		Skipped string `json:"skipped"`
		Error   string `json:"error"`
		Checks  []struct {
			Name   string `json:"name"`
			Want   string `json:"want"`
			Got    string `json:"got"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
	} `json:"backends"`
}

// postureChecks are checks every backend's posture must hold (a few of them: the
// command prints them all).
var postureChecks = []string{
	"uid:gid", "host root", "CapEff", "CapBnd", "no_new_privs", "seccomp mode",
	"landlock: write /proc/self/comm", "seccomp: bpf", "user namespace (clone3)",
	"process 1: open /proc/1/fd", "process 1: ptrace(PTRACE_SEIZE)", "process 1: pidfd_getfd",
	"process 1: kill(1, SIGUSR1)", "network interfaces", "writable kernel interfaces",
	"read-write mounts", "stdio: fd 1", "descriptors beyond stdio", "writable cgroup file system",
}

// doctor runs `cordon doctor --json` with args and checks that every check of the one
// backend passed.
func (w *world) doctor(backend string, args ...string) {
	w.t.Helper()
	r := w.cordon("", append([]string{"doctor", "--json", "--backend", backend}, args...)...)
	var d doctorJSON
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		w.t.Fatalf("doctor --json: %v\n%v", err, r)
	}
	if d.Version != 1 || len(d.Backends) != 1 || d.Backends[0].Backend != backend {
		w.t.Fatalf("doctor --json: want version 1 and one backend %s, got %+v", backend, d)
	}
	b := d.Backends[0]
	if b.Error != "" {
		w.t.Fatalf("%s: the sandbox could not be built: %s", backend, b.Error)
	}
	seen := map[string]bool{}
	for _, c := range b.Checks {
		seen[c.Name] = true
		if !c.OK {
			w.t.Errorf("%s: %s: want %s, got %s (%s)", backend, c.Name, c.Want, c.Got, c.Detail)
		}
	}
	for _, name := range postureChecks {
		if !seen[name] {
			w.t.Errorf("%s: no check %q", backend, name)
		}
	}
	if !b.OK || r.code != 0 {
		w.t.Errorf("%s: want ok and exit 0, got ok=%v, exit %d\n%s", backend, b.OK, r.code, r.stderr)
	}
}

// ownWorkspace gives the workspace to an ordinary user: container backends, which
// have no user namespace, run its owner's uid.
func ownWorkspace(t *testing.T, w *world) {
	t.Helper()
	err := filepath.Walk(w.ws, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, 1000, 1000)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPostureBwrap(t *testing.T) {
	w := newWorld(t)
	w.doctor("bwrap") // the built-in default contract; root's workspace runs as a leased uid
}

func TestPostureContainers(t *testing.T) {
	image := requireEngines(t)
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		w := newWorld(t)
		w.imageContract(image, "")
		ownWorkspace(t, w)
		w.doctor(backend)
	})
}

// TestDoctorTable: without --backend, every usable backend, as a table.
func TestDoctorTable(t *testing.T) {
	w := newWorld(t)
	backends := []string{"bwrap"}
	if os.Getuid() == 0 || os.Getenv("CI") == "true" {
		w.imageContract(requireEngines(t), "")
		ownWorkspace(t, w)
		backends = append(backends, containerBackends...)
	}
	r := w.cordon("", "doctor")
	if r.code != 0 {
		t.Fatalf("doctor: want exit 0, got %v", r)
	}
	assertContains(t, "stdout", r.stdout, "CHECK")
	for _, name := range postureChecks {
		assertContains(t, "stdout", r.stdout, "\n"+name+" ")
	}
	for _, b := range backends {
		assertContains(t, "stdout", r.stdout, b+": all ")
	}
}
