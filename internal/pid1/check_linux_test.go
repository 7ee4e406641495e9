package pid1

import (
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// On the host, outside any sandbox, the self-check must fail: it is what stops a
// command from running when a backend built less than the contract asked for.
func TestSelfCheckFailsOutsideASandbox(t *testing.T) {
	testutil.RequireRoot(t)
	err := selfCheck(&Spec{Argv: []string{"true"}})
	if err == nil {
		t.Fatal("the self-check passed on the host")
	}
	msg := err.Error()
	if !strings.Contains(msg, "network interface") && !strings.Contains(msg, "capability set") && !strings.Contains(msg, "read-write") {
		t.Fatalf("unexpected reason: %v", err)
	}
}

func TestCheckMounts(t *testing.T) {
	const base = `1 0 0:1 / / ro,nosuid - tmpfs tmpfs ro
2 1 0:2 / /dev rw,nosuid - tmpfs tmpfs rw
3 2 0:5 /null /dev/null rw,nosuid - devtmpfs udev rw
4 1 0:3 / /proc rw,nosuid - proc proc rw
5 1 8:1 /src /work/ws rw,relatime - ext4 /dev/vda rw
6 5 8:1 /src/.git /work/ws/.git ro,relatime - ext4 /dev/vda rw
`
	if err := checkMounts(base, []string{"/work/ws"}); err != nil {
		t.Fatalf("a correct sandbox failed: %v", err)
	}
	if err := checkMounts(base, nil); err == nil || !strings.Contains(err.Error(), "/work/ws is mounted read-write") {
		t.Fatalf("an ungranted writable mount passed: %v", err)
	}
	// A host path at a kernel file system's mount point is not that file system.
	evil := base + "7 1 8:1 /etc /dev/shm rw - ext4 /dev/vda rw\n8 1 8:1 /home /work/with\\040space rw - ext4 /dev/vda rw\n"
	if err := checkMounts(evil, []string{"/work/ws"}); err == nil || !strings.Contains(err.Error(), "/dev/shm") {
		t.Fatalf("a host bind at /dev/shm passed: %v", err)
	}
	if err := checkMounts(evil, []string{"/work/ws", "/dev/shm"}); err == nil || !strings.Contains(err.Error(), "/work/with space") {
		t.Fatalf("escaped mount point: %v", err)
	}
}
