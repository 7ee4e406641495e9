package monitor

import (
	"path/filepath"

	"github.com/cordonhq/cordon/contract"
)

// The kernel's path filter (filters in bpf/maps.h): an LPM trie per run whose keys
// are the profile's rule paths with a '/' appended and whose values say which accesses
// below them deviate from nothing. The programs drop an open only when its clean
// absolute path finds an entry allowing its access, so the filter's table must give,
// for every path it matches, the answer Profile.checkPath gives: every rule is in it
// (denying ones too, so that a longer denying rule wins over a shorter allowing one),
// and every link with what is below it is an entry that allows nothing (user space
// reads a path through a link as its target), as is /proc and the /dev links into it
// (magicDirs: /proc/self/root/etc/shadow is /etc/shadow).
const (
	filterRead  = 1 // FILTER_READ: a read below the path deviates from nothing
	filterWrite = 2 // FILTER_WRITE: nor does a write

	filterKeyData    = 256  // KEY_DATA: bytes of a key's path
	filterMaxEntries = 4096 // max_entries of struct filter
)

// filterEntries returns the filter of prof, by key ("/usr/"). ok is false when prof has
// a rule or a link the filter cannot represent (not clean, or too long for a key): the
// run then gets no filter, and every open is sent.
func filterEntries(prof *Profile) (entries map[string]uint8, ok bool) {
	entries = map[string]uint8{}
	for _, r := range prof.Paths { // the last rule of a path decides, as in Profile.rule
		k, ok := filterKey(r.Path)
		if !ok {
			return nil, false
		}
		entries[k] = accessBits(r)
	}
	// A process's links in /proc lead elsewhere than their path says (proclink.go):
	// what is below them is sent, as what is below the plan's links.
	var links []string
	for _, l := range prof.Links {
		links = append(links, l.Path)
	}
	for _, l := range append(links, magicDirs...) {
		lk, ok := filterKey(l)
		if !ok {
			return nil, false
		}
		for k := range entries {
			if len(k) >= len(lk) && k[:len(lk)] == lk {
				entries[k] = 0
			}
		}
		entries[lk] = 0
	}
	if len(entries) > filterMaxEntries {
		return nil, false
	}
	return entries, true
}

// filterKey is the key of a rule path: the path with a '/' appended ("/" stays "/"), so
// that "/etc/" matches "/etc/passwd/" but not "/etcx/".
func filterKey(p string) (string, bool) {
	if p == "" || p[0] != '/' || filepath.Clean(p) != p {
		return "", false
	}
	if p != "/" {
		p += "/"
	}
	return p, len(p) < filterKeyData
}

// accessBits are the accesses below r's path that Profile.checkPath lets through.
func accessBits(r PathRule) uint8 {
	switch r.Access {
	case contract.ReadOnly:
		return filterRead
	case contract.ReadWrite:
		return filterRead | filterWrite
	}
	return 0
}
