package uids

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeEtc is a directory holding the account files given, by name.
func fakeEtc(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRangeHoldingAnAccountIsRefused(t *testing.T) {
	etc := fakeEtc(t, map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/sh\n+nis-entry\nmallory:x:2000000005:2000000900::/home/m:/bin/sh\n\nbroken:line\n",
		"group":  "root:x:0:\nops:x:2000000700:mallory\n",
		"subuid": "alice:2100000000:65536\n",
		"subgid": "# comment\nbob:2100100000:65536\n",
	})
	for _, tc := range []struct {
		name string
		r    Range
		want []string // each in the error; none: no error
	}{
		{"clear of every account", Range{3000001000, 1000}, nil},
		{"a user's uid", Range{2000000000, 10}, []string{"uid 2000000005", `"mallory"`, "passwd"}},
		{"a user's primary gid", Range{2000000900, 1}, []string{"gid 2000000900", `"mallory"`, "passwd"}},
		{"a group's gid", Range{2000000650, 100}, []string{"gid 2000000700", `"ops"`, "group"}},
		{"subordinate uids", Range{2100065535, 10}, []string{"2100000000", `"alice"`, "subuid"}},
		{"subordinate gids", Range{2100165535, 2}, []string{"2100100000", `"bob"`, "subgid"}},
		{"several at once", Range{2000000000, 1000}, []string{"mallory", "ops"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.checkAccounts(etc)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("%v: %v", tc.r, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%v: accepted; want a refusal naming %q", tc.r, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: %v; want it to name %q", tc.r, err, w)
				}
			}
		})
	}
}

func TestManyConflictsAreCounted(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		b.WriteString("u" + string(rune('a'+i%26)) + ":x:" + strconv.Itoa(2000000000+i) + ":" + strconv.Itoa(2000000000+i) + "::/:/bin/sh\n")
	}
	err := (Range{2000000000, 100}).checkAccounts(fakeEtc(t, map[string]string{"passwd": b.String()}))
	if err == nil || !strings.Contains(err.Error(), "more") || len(err.Error()) > 2000 {
		t.Fatalf("50 accounts in the range: %v; want a bounded message that counts the rest", err)
	}
}

func TestMissingAccountFilesHoldNoAccounts(t *testing.T) {
	if err := (Range{2000000000, 10}).checkAccounts(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

func TestUnreadableAccountFileRefuses(t *testing.T) {
	etc := t.TempDir()
	if err := os.Mkdir(filepath.Join(etc, "passwd"), 0o755); err != nil { // not a file
		t.Fatal(err)
	}
	if err := (Range{2000000000, 10}).checkAccounts(etc); err == nil || !strings.Contains(err.Error(), "passwd") {
		t.Fatalf("an unreadable /etc/passwd: %v; want a refusal naming it", err)
	}
}

func TestDefaultRangeHoldsNoAccountHere(t *testing.T) {
	if err := DefaultRange.CheckHost(); err != nil {
		t.Fatalf("the default range on this host: %v", err)
	}
}

func TestRangeFromEnvRefusesAnAccountsUID(t *testing.T) {
	t.Setenv(LegacyEnv, "")
	t.Setenv(RangeEnv, "1000:10")
	if _, err := RangeFromEnv(); err == nil || !strings.Contains(err.Error(), "65536") {
		t.Fatalf("%s=1000:10: %v; want a refusal (below 65536)", RangeEnv, err)
	}
}
