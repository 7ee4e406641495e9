package seccomp

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

func TestTablesSortedAndUnique(t *testing.T) {
	for _, arch := range arches(t) {
		names := map[string]bool{}
		for i, s := range arch.table {
			if i > 0 && s.nr <= arch.table[i-1].nr {
				t.Errorf("%s: %s (%d) after %s (%d)", arch, s.name, s.nr, arch.table[i-1].name, arch.table[i-1].nr)
			}
			if names[s.name] {
				t.Errorf("%s: %s twice", arch, s.name)
			}
			names[s.name] = true
		}
	}
}

// TestTablesMatchXSys checks the copied tables against golang.org/x/sys/unix, which
// this package may not import, by reading its source from the module cache.
func TestTablesMatchXSys(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	dir := strings.TrimSpace(string(out))
	testutil.Require(t, err == nil && dir != "", fmt.Sprintf("x/sys source not found (go list: %v)", err))
	sysnum := regexp.MustCompile(`SYS_(\w+)\s*=\s*(\d+)`)
	for _, arch := range arches(t) {
		src, err := os.ReadFile(filepath.Join(dir, "unix", "zsysnum_linux_"+arch.String()+".go"))
		testutil.Require(t, err == nil, fmt.Sprint("x/sys syscall table: ", err))
		want := map[string]uint32{}
		for _, m := range sysnum.FindAllStringSubmatch(string(src), -1) {
			n, _ := strconv.ParseUint(m[2], 10, 32)
			want[strings.ToLower(m[1])] = uint32(n)
		}
		got := map[string]uint32{}
		for _, s := range arch.table {
			got[s.name] = s.nr
		}
		for name, nr := range want {
			if g, ok := got[name]; !ok || g != nr {
				t.Errorf("%s: %s is %d in x/sys, %d (present %v) here", arch, name, nr, g, ok)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: %s is not in x/sys", arch, name)
			}
		}
	}
}

// TestPolicyNamesExist catches a misspelt name, which would otherwise deny silently.
func TestPolicyNamesExist(t *testing.T) {
	as := arches(t)
	for name := range Default().Rules {
		found := false
		for _, a := range as {
			_, ok := a.Number(name)
			found = found || ok
		}
		if !found {
			t.Errorf("%s is in no arch's table", name)
		}
	}
	if !slices.IsSorted(allowed) {
		t.Error("allowed is not sorted")
	}
}

// mobyProfile is the part of Docker's seccomp profile the comparison needs.
type mobyProfile struct {
	DefaultAction string `json:"defaultAction"`
	Syscalls      []struct {
		Names    []string   `json:"names"`
		Action   string     `json:"action"`
		Args     []mobyArg  `json:"args"`
		Includes mobyFilter `json:"includes"`
		Excludes mobyFilter `json:"excludes"`
	} `json:"syscalls"`
}

type mobyArg struct {
	Index    int    `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

type mobyFilter struct {
	Caps      []string `json:"caps"`
	Arches    []string `json:"arches"`
	MinKernel string   `json:"minKernel"`
}

// allows reports whether Docker's profile lets a process with no capabilities, on
// arch and a kernel newer than 4.8, make the call with args.
func (p mobyProfile) allows(t *testing.T, arch, name string, args [6]uint64) bool {
	for _, s := range p.Syscalls {
		if s.Action != "SCMP_ACT_ALLOW" || len(s.Includes.Caps) > 0 || !slices.Contains(s.Names, name) {
			continue
		}
		if len(s.Includes.Arches) > 0 && !slices.Contains(s.Includes.Arches, arch) || slices.Contains(s.Excludes.Arches, arch) {
			continue
		}
		match := true
		for _, a := range s.Args {
			v := args[a.Index]
			switch a.Op {
			case "SCMP_CMP_EQ":
				match = match && v == a.Value
			case "SCMP_CMP_LT":
				match = match && v < a.Value
			case "SCMP_CMP_MASKED_EQ":
				match = match && v&a.Value == a.ValueTwo
			default:
				t.Fatalf("%s: op %s not understood", name, a.Op)
			}
		}
		if match {
			return true
		}
	}
	return false
}

// unlikeDocker are the calls the filter allows and Docker's profile does not, each
// with what stands in for the filter there.
var unlikeDocker = map[string]string{
	"clone3": "process 1 forks each command from a confined thread straight into its cgroup (CLONE_INTO_CGROUP); " +
		"a user namespace, the one namespace clone3 makes without a capability, is refused by bwrap's --disable-userns " +
		"and by the engines' own profiles (clone3 ENOSYS)",
}

// TestAtLeastAsStrictAsDocker: whatever the filter allows, Docker's default profile
// allows to a process with no capabilities. Calls with argument tests are probed with
// every value either side names, every single bit, and the two ends of the range.
func TestAtLeastAsStrictAsDocker(t *testing.T) {
	data, err := os.ReadFile("testdata/moby-default.json")
	if err != nil {
		t.Fatal(err)
	}
	var moby mobyProfile
	if err := json.Unmarshal(data, &moby); err != nil {
		t.Fatal(err)
	}
	if moby.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatalf("docker's default action is %s", moby.DefaultAction)
	}
	p := Default()
	for _, arch := range arches(t) {
		f := newFilter(t, arch)
		for _, s := range arch.table {
			for _, args := range probes(moby, p.Rules[s.name], s.name) {
				got, _ := f.run(t, call{nr: s.nr, arch: arch.audit, args: args})
				if got == retAllow && !moby.allows(t, arch.String(), s.name, args) && unlikeDocker[s.name] == "" {
					t.Errorf("%s: %s%#x allowed here, denied by docker", arch, s.name, args)
				}
			}
		}
	}
}

// probes returns argument vectors worth trying on the call name.
func probes(moby mobyProfile, r Rule, name string) [][6]uint64 {
	idx := map[int][]uint64{}
	for _, c := range r.DenyIf {
		for _, v := range c.Values {
			idx[c.Arg] = append(idx[c.Arg], uint64(v))
		}
	}
	for _, s := range moby.Syscalls {
		if slices.Contains(s.Names, name) {
			for _, a := range s.Args {
				idx[a.Index] = append(idx[a.Index], a.Value, a.Value-1, a.Value+1)
			}
		}
	}
	out := [][6]uint64{{}}
	for i, vals := range idx {
		vals = append(vals, 0, 0xffffffff)
		for b := range 32 {
			vals = append(vals, 1<<b)
		}
		for _, v := range vals {
			if v > 0xffffffff {
				// The tested arguments are 32-bit to the kernel (see Cond); Docker's 64-bit
				// compares deny high-word twins of calls it allows, which the kernel
				// cannot tell apart from them.
				continue
			}
			var args [6]uint64
			args[i] = v
			out = append(out, args)
		}
	}
	return out
}
