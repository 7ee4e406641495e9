package linux

import (
	"strconv"
	"strings"
)

// MountInfo is one line of /proc/PID/mountinfo.
type MountInfo struct {
	ID     int    // mount ID (what [MountID] returns for a path on it)
	Dev    string // the file system's device, "major:minor"
	Root   string // the directory of its file system mounted there, unescaped
	Point  string // mount point, unescaped
	Opts   string // per-mount options ("rw,nosuid,...")
	FSType string
	Source string
	Super  string // super-block options
}

// ReadOnly reports whether the mount is read-only.
func (m MountInfo) ReadOnly() bool {
	for _, o := range strings.Split(m.Opts, ",") {
		if o == "ro" {
			return true
		}
	}
	return false
}

// parseMountinfo parses one mountinfo line (see proc(5)).
func parseMountinfo(line string) (MountInfo, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return MountInfo{}, false
	}
	// Fields are separated by one space: the kernel escapes only space, tab, newline
	// and backslash in paths, so a path may hold any other character strings.Fields
	// would split at (\r, \v, \f, U+0085, U+00A0), which would shift every field
	// after it: a mount's options read from its path.
	f := strings.Split(pre, " ")
	g := strings.Split(post, " ")
	if len(f) < 6 || len(g) < 3 {
		return MountInfo{}, false
	}
	id, err := strconv.Atoi(f[0])
	if err != nil {
		return MountInfo{}, false
	}
	return MountInfo{ID: id, Dev: f[2], Root: unescapeOctal(f[3]), Point: unescapeOctal(f[4]), Opts: f[5], FSType: g[0], Source: g[1], Super: g[2]}, true
}

// ParseMountinfo parses a whole mountinfo file.
func ParseMountinfo(data string) []MountInfo {
	var out []MountInfo
	for _, line := range strings.Split(data, "\n") {
		if m, ok := parseMountinfo(line); ok {
			out = append(out, m)
		}
	}
	return out
}

// unescapeOctal undoes the kernel's \NNN escaping of spaces, tabs, newlines and
// backslashes in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
