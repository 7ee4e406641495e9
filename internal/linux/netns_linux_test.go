package linux

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// netnsChildEnv makes the test binary the child of TestEmptyNetns.
const netnsChildEnv = "CORDON_TEST_NETNS_CHILD"

// netnsChild runs in the child EmptyNetnsAttr made: it brings loopback up, drops
// every capability, and prints what it then holds.
func netnsChild() {
	if err := LoopbackUp(); err != nil {
		fmt.Println("loopback:", err)
		os.Exit(1)
	}
	if err := DropAllCaps(); err != nil {
		fmt.Println("caps:", err)
		os.Exit(1)
	}
	ifs, _ := os.ReadFile("/proc/net/dev")
	fmt.Printf("netdev:\n%s", ifs)
	// Every thread, not only this one: each /proc/self/task/*/status.
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		st, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		sc := bufio.NewScanner(bytes.NewReader(st))
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "Cap") || strings.HasPrefix(sc.Text(), "NoNewPrivs") {
				fmt.Printf("task %s %s\n", task.Name(), sc.Text())
			}
		}
	}
	os.Exit(0)
}

func init() {
	if os.Getenv(netnsChildEnv) == "1" {
		netnsChild()
	}
}

// A child of EmptyNetnsAttr has a network namespace of loopback only, can bring it
// up, and after DropAllCaps holds no capability on any thread, with no_new_privs.
// Run as a user other than root where the machine allows it (as root it works too:
// root may make user namespaces).
func TestEmptyNetns(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := func(bin string) ([]byte, error) {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
		cmd.SysProcAttr = EmptyNetnsAttr()
		return cmd.CombinedOutput()
	}
	out, err := child(self)
	if err != nil && strings.Contains(string(out), ErrCgo.Error()) {
		// This binary links cgo (go test -race does), where DropAllCaps cannot reach
		// every thread, as in cordon-init, which is built without it: the child is
		// this package's tests built the same way.
		bin := filepath.Join(t.TempDir(), "linux.test")
		build := exec.Command("go", "test", "-c", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the tests without cgo: %v\n%s", err, b)
		}
		out, err = child(bin)
	}
	if err != nil {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	var devs []string
	threads := 0
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.Contains(line, "|") && !strings.HasPrefix(line, "task ") && name != "netdev" {
			devs = append(devs, name)
		}
		if f := strings.Fields(line); len(f) == 4 && f[0] == "task" {
			switch {
			case f[2] == "NoNewPrivs:" && f[3] != "1":
				t.Errorf("task %s: no_new_privs %s", f[1], f[3])
			case strings.HasPrefix(f[2], "Cap") && f[3] != "0000000000000000":
				t.Errorf("task %s: %s %s", f[1], f[2], f[3])
			case f[2] == "CapEff:":
				threads++
			}
		}
	}
	if len(devs) != 1 || devs[0] != "lo" {
		t.Errorf("the child's interfaces %q, want lo only\n%s", devs, out)
	}
	if threads < 2 {
		t.Errorf("%d threads measured, want every thread of a Go process (several)\n%s", threads, out)
	}
}
