package uids

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The host's accounts a range must not hold. A sandbox runs as a leased uid, with
// gid = uid, and whoever holds a uid owns that account's files and processes: a range
// that held a user's uid (or gid, or the subordinate ids a user's containers map to)
// would run a sandbox as that user. Only the local files are read: accounts an NSS
// service (LDAP, sssd) serves are not seen, and must lie outside the range.
var accountFiles = []accountFile{
	{name: "passwd", kind: "user"},
	{name: "group", kind: "group"},
	{name: "subuid", kind: "subordinate uids"},
	{name: "subgid", kind: "subordinate gids"},
}

type accountFile struct {
	name string // in /etc
	kind string
}

// maxAccountFile bounds what is read of one account file; a bigger one is refused
// rather than read in part.
const maxAccountFile = 64 << 20

// maxConflicts bounds how many conflicts an error names; the rest are counted.
const maxConflicts = 5

// CheckHost refuses a range that holds an id of the host's accounts: a uid or primary
// gid in /etc/passwd, a gid in /etc/group, or any of the subordinate ids in
// /etc/subuid or /etc/subgid (the sandbox's gid is its uid, so a range is checked
// against both). The error names each conflict, and the file it is in. An account
// file that does not exist holds no account; one that cannot be read is an error.
func (r Range) CheckHost() error { return r.checkAccounts("/etc") }

// checkAccounts is CheckHost with the account files in etc.
func (r Range) checkAccounts(etc string) error {
	var conflicts []string
	n := 0
	for _, af := range accountFiles {
		path := filepath.Join(etc, af.name)
		err := eachLine(path, func(line string) {
			if c := r.conflict(af, line); c != "" {
				if n++; n <= maxConflicts {
					conflicts = append(conflicts, c+" ("+path+")")
				}
			}
		})
		if err != nil {
			return fmt.Errorf("cannot check the range against the host's accounts: %w", err)
		}
	}
	if n == 0 {
		return nil
	}
	msg := strings.Join(conflicts, "; ")
	if n > maxConflicts {
		msg += fmt.Sprintf("; and %d more", n-maxConflicts)
	}
	return fmt.Errorf("the range holds ids of the host's accounts, and a sandbox would run as their owner: %s", msg)
}

// conflict says how line of af puts an id of r's to use, or "" when it does not (or is
// not an account line: comments, NIS "+" entries, malformed lines hold no ids).
func (r Range) conflict(af accountFile, line string) string {
	f := strings.Split(line, ":")
	name := strconv.Quote(f[0])
	switch af.name {
	case "passwd":
		if len(f) < 4 {
			return ""
		}
		if uid, ok := parseID(f[2]); ok && r.Contains(uid) {
			return fmt.Sprintf("uid %d of user %s", uid, name)
		}
		if gid, ok := parseID(f[3]); ok && r.Contains(gid) {
			return fmt.Sprintf("gid %d of user %s", gid, name)
		}
	case "group":
		if len(f) < 3 {
			return ""
		}
		if gid, ok := parseID(f[2]); ok && r.Contains(gid) {
			return fmt.Sprintf("gid %d of group %s", gid, name)
		}
	default: // subuid, subgid: NAME:START:COUNT
		if len(f) != 3 {
			return ""
		}
		start, ok1 := parseID(f[1])
		count, ok2 := parseID(f[2])
		if ok1 && ok2 && count > 0 && start < r.Base+r.Count && r.Base < start+count {
			return fmt.Sprintf("%s %d:%d of %s", af.kind, start, count, name)
		}
	}
	return ""
}

// parseID reads a decimal id of 32 bits.
func parseID(s string) (int, bool) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	return int(v), err == nil
}

// eachLine calls fn with each line of path that is neither blank nor a comment. A
// path that does not exist has none.
func eachLine(path string, fn func(string)) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	br := bufio.NewReader(io.LimitReader(f, maxAccountFile+1))
	read := 0
	for {
		line, err := br.ReadString('\n')
		read += len(line)
		if read > maxAccountFile {
			return fmt.Errorf("%s is larger than %d MiB", path, maxAccountFile>>20)
		}
		if s := strings.TrimSpace(line); s != "" && s[0] != '#' {
			fn(s)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
	}
}
