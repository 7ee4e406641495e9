package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/internal/uids"
)

// uidRangeAttacks are ranges an operator (or a script that sets the environment) can
// give $CORDON_UID_RANGE that hold a host account's id. Accounts lists the lines added
// to the host's account files (seen by cordon alone, in a mount namespace of its own)
// so that an account above 65535 exists; want is what the refusal names.
var uidRangeAttacks = []struct {
	name     string
	rng      string
	accounts map[string]string // /etc file → line added
	want     []string
}{
	{"root", "0:16", nil, []string{"65536"}},
	{"nobody", "65534:1", nil, []string{"65536"}},
	{"a user's uid", "2000000000:16", map[string]string{"passwd": "mallory:x:2000000005:100::/home/mallory:/bin/sh"}, []string{`"mallory"`, "uid 2000000005", "/etc/passwd"}},
	{"a group's gid", "2000000000:16", map[string]string{"group": "ops:x:2000000009:"}, []string{`"ops"`, "gid 2000000009", "/etc/group"}},
	{"a user's subordinate uids", "2000000000:16", map[string]string{"subuid": "alice:1999999990:100"}, []string{`"alice"`, "/etc/subuid"}},
	{"a user's subordinate gids", "2000000000:16", map[string]string{"subgid": "alice:2000000015:65536"}, []string{`"alice"`, "/etc/subgid"}},
	{"past the last uid", "4294967290:16", nil, []string{"2147483647"}},
	{"past 2^31", "2147483640:16", nil, []string{"2147483647"}},
}

// TestUIDRangeHoldingAnAccountRefused (bwrap, docker, containerd; a root-owned
// workspace, whose sandbox runs as a uid leased from the range): a $CORDON_UID_RANGE
// that holds a host account's uid or gid, its subordinate ids, the first 64 Ki ids or
// an id past the last makes the run a 125 naming the conflict, before any sandbox
// runs: the command never runs and no uid of the range is leased. `cordon doctor`
// refuses the same way.
func TestUIDRangeHoldingAnAccountRefused(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("bwrap", uidRangeRefusals)
	forEachContainerBackend(t, func(t *testing.T, _ string) { uidRangeRefusals(t) })
}

func uidRangeRefusals(t *testing.T) {
	for _, a := range uidRangeAttacks {
		t.Run(a.name, func(t *testing.T) {
			w := newWorld(t)
			r := w.cordonWithAccounts(a.accounts, a.rng, "run", "--", "sh", "-c", "id -u > ran")
			if r.code != 125 {
				t.Errorf("%s=%s: %v; want 125", uids.RangeEnv, a.rng, r)
			}
			for _, want := range a.want {
				assertContains(t, "the refusal", r.stderr, want)
			}
			if got, err := os.ReadFile(filepath.Join(w.ws, "ran")); err == nil {
				t.Errorf("the command ran (as uid %s) under a range that holds an account's id", strings.TrimSpace(string(got)))
			}
			assertRangeUnleased(t, a.rng)
		})
	}
	t.Run("doctor", func(t *testing.T) {
		w := newWorld(t)
		a := uidRangeAttacks[2]
		r := w.cordonWithAccounts(a.accounts, a.rng, "doctor")
		if r.code != 125 || !strings.Contains(r.stdout+r.stderr, `"mallory"`) {
			t.Errorf("doctor with %s=%s: %v; want 125 naming the account", uids.RangeEnv, a.rng, r)
		}
		assertRangeUnleased(t, a.rng)
	})
}

// assertRangeUnleased fails when a uid of rng (at most its first 64) has a lease.
func assertRangeUnleased(t *testing.T, rng string) {
	t.Helper()
	b, c, _ := strings.Cut(rng, ":")
	base, _ := strconv.Atoi(b)
	count, _ := strconv.Atoi(c)
	for uid := base; uid < base+min(count, 64); uid++ {
		if rec, ok := leaseOf(uid); ok {
			t.Errorf("uid %d of the refused range is leased: %+v", uid, rec)
		}
	}
}

// cordonWithAccounts runs cordon with $CORDON_UID_RANGE=rng in a mount namespace of
// its own, where each /etc file of accounts is the host's with the line added (bound
// over it: the host's files are not changed).
func (w *world) cordonWithAccounts(accounts map[string]string, rng string, args ...string) result {
	w.t.Helper()
	script := ""
	for name, line := range accounts {
		host := filepath.Join("/etc", name)
		data, err := os.ReadFile(host)
		if err != nil && !os.IsNotExist(err) {
			w.t.Fatal(err)
		}
		if len(data) > 0 && !strings.HasSuffix(string(data), "\n") {
			data = append(data, '\n')
		}
		fake := filepath.Join(w.t.TempDir(), name)
		mustWrite(w.t, fake, string(data)+line+"\n")
		if os.IsNotExist(err) {
			mustWrite(w.t, host, "") // a file to bind over; removed below
			w.t.Cleanup(func() { os.Remove(host) })
		}
		script += "mount --bind " + fake + " " + host + " && "
	}
	script += `exec "$@"`
	cmd := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh", testutil.Cordon(w.t)}, args...)...)
	cmd.Dir = w.ws
	cmd.Env = append(append([]string(nil), w.env...), uids.RangeEnv+"="+rng)
	return runResult(w.t, cmd, "cordon")
}
