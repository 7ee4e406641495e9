// Package workspace fills and reads the workspaces `cordon serve` owns for its
// tenants: it unpacks a tenant's tar into a new, empty workspace ([Unpack]), writes a
// workspace out as a tar ([Pack]) and checks a git source a session start names
// ([CheckGit]).
//
// A tar is hostile input unpacked on the host by root. Every entry is checked before
// anything is made of it: a relative path of clean components (no absolute path, no
// "..", bounded in length and depth), a directory, a regular file, a symbolic link or
// a hard link, nothing else (no device, FIFO or socket), no set-user-ID, set-group-ID
// or sticky bit. A symbolic link is stored as a link and never followed: every path is
// made through an internal/linux Tree (openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS), so an entry below a link the archive made earlier is refused,
// not written through it. A link's target may not leave the workspace, whatever
// the archive's other links (see linkStaysInside), and a hard link names a file the
// archive already made (a symbolic link, in its new place, held to the same rule). The whole archive is bounded in bytes
// and entries ([Limits]); what is made is owned by the workspace's owner, whatever
// the archive says. The first refused entry ends the unpacking with an [EntryError]
// naming it.
package workspace

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Fixed bounds of an archive's names.
const (
	MaxPath  = 4096 // bytes of an entry's path or a link's target
	MaxName  = 255  // bytes of one component
	MaxDepth = 256  // components of a path
)

// Limits bound one archive: unpacked or packed.
type Limits struct {
	Bytes   int64 // the sum of the regular files' sizes
	Entries int   // entries, directories made for them included
}

// Stats are what an unpacking, a packing or a [Sync] made.
type Stats struct {
	Entries int
	Bytes   int64
	// Sync only: paths created or replaced, paths removed, and paths left as they
	// are although the archive differs there (writable refused them, or the entry
	// was one Unpack refuses), the first MaxRefusedListed of them named.
	Changed, Removed, Refused int
	RefusedPaths              []string
}

// Synced is what [SyncFrom] took from an archive.
type Synced struct {
	Stats
	// Changes: the archive held only what changed since the stream's last pack
	// ([PackChanges] with a base); otherwise it held the whole tree.
	Changes bool
	// Names are the archive's paths (clean, "." left out), each true; a changes
	// archive's removed paths are in Removed instead.
	Names   map[string]bool
	Removed []string
}

// Errors an [EntryError] matches (errors.Is).
var (
	// ErrRefused: an entry that is not allowed (its path, type, mode or link).
	ErrRefused = errors.New("entry refused")
	// ErrTooLarge: the archive passes a [Limits] bound.
	ErrTooLarge = errors.New("archive too large")
	// ErrMalformed: the stream is not a tar archive.
	ErrMalformed = errors.New("not a tar archive")
	// ErrNoSpace: the workspace's file system is full (for an unprivileged writer:
	// [Unpack] writes without the blocks reserved for root).
	ErrNoSpace = errors.New("no space left on the tenant's disk")
)

// EntryError is an archive refused at one entry.
type EntryError struct {
	Entry  string // the entry's name as the archive gives it (quoted when shown)
	Reason string
	Err    error // ErrRefused, ErrTooLarge, ErrMalformed or ErrNoSpace
	Cause  error // what made the stream unreadable, for ErrMalformed, or the write's error, for ErrNoSpace (errors.As reaches it)
}

func (e *EntryError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("%v: %s", e.Err, e.Reason)
	}
	return fmt.Sprintf("%v: %q: %s", e.Err, e.Entry, e.Reason)
}

// Is matches the error's category.
func (e *EntryError) Is(target error) bool { return target == e.Err }

// Unwrap is the cause of an unreadable stream (a body past its limit, say), or nil.
func (e *EntryError) Unwrap() error { return e.Cause }

func refused(entry, format string, args ...any) error {
	return &EntryError{Entry: entry, Reason: fmt.Sprintf(format, args...), Err: ErrRefused}
}

func tooLarge(entry, format string, args ...any) error {
	return &EntryError{Entry: entry, Reason: fmt.Sprintf(format, args...), Err: ErrTooLarge}
}

// cleanPath returns an entry's name as a path below the workspace ("." for the
// workspace itself): a leading "./" and a trailing "/" are dropped, and anything
// but components that are neither empty, "." nor ".." is refused.
func cleanPath(name string) (string, error) {
	if len(name) > MaxPath {
		return "", fmt.Errorf("a path of %d bytes (at most %d)", len(name), MaxPath)
	}
	if strings.ContainsRune(name, 0) {
		return "", errors.New("a NUL in the path")
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("an absolute path")
	}
	p := strings.TrimSuffix(name, "/")
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	if p == "" || p == "." {
		return ".", nil
	}
	parts := strings.Split(p, "/")
	if len(parts) > MaxDepth {
		return "", fmt.Errorf("%d components (at most %d)", len(parts), MaxDepth)
	}
	for _, c := range parts {
		switch {
		case c == "..":
			return "", errors.New("a '..' component")
		case c == "" || c == ".":
			return "", errors.New("an empty or '.' component")
		case len(c) > MaxName:
			return "", fmt.Errorf("a component of %d bytes (at most %d)", len(c), MaxName)
		}
	}
	return p, nil
}

// linkStaysInside reports whether the symbolic link at p (a clean path) pointing to
// target resolves within the workspace, whatever the workspace's other links: target
// is relative, climbs only at its start ("../../x", never "x/../y": x may be a link
// itself, and a ".." after it climbs from wherever x points) and no higher than p's
// directory, a directory of the workspace (an archive's links are made through none).
// A link that is lexically inside is not enough: "d/l/../../x" is, and climbs out of
// the workspace when d/l is a link to "..".
func linkStaysInside(p, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") {
		return false
	}
	up, climbing := 0, true
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if !climbing {
				return false
			}
			up++
		default:
			climbing = false
		}
	}
	depth := 0
	if d := path.Dir(p); d != "." {
		depth = strings.Count(d, "/") + 1
	}
	return up <= depth
}

// CheckGit checks a git source a session start names: url is https:// or http://
// (the commit pins the content, whatever the transport), with a host, no user or
// password, nothing a git transport could take as an option or a command (no
// leading '-', no "ext::", no file:// or local path, no control character); commit
// is a full object id, 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
func CheckGit(url, commit string) error {
	var errs []error
	if err := checkGitURL(url); err != nil {
		errs = append(errs, fmt.Errorf("git.url: %w", err))
	}
	if !isObjectID(commit) {
		errs = append(errs, errors.New("git.commit: want a full commit id, 40 or 64 lowercase hex digits"))
	}
	return errors.Join(errs...)
}

func checkGitURL(u string) error {
	if len(u) > 2048 {
		return errors.New("longer than 2048 bytes")
	}
	for _, c := range u {
		if c <= ' ' || c == 0x7f || c == '\\' {
			return errors.New("a space, control character or backslash")
		}
	}
	rest, ok := strings.CutPrefix(u, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(u, "http://"); !ok {
			return errors.New("want an https:// (or http://) URL")
		}
	}
	host, _, _ := strings.Cut(rest, "/")
	switch {
	case host == "":
		return errors.New("no host")
	case strings.ContainsAny(host, "@?#"):
		return errors.New("user information, a query or a fragment in the host part")
	case strings.HasPrefix(host, "-"):
		return errors.New("a host starting with '-'")
	}
	return nil
}

func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
