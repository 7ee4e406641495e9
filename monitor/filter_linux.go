package monitor

import (
	"encoding/binary"

	"github.com/cilium/ebpf"
)

// bpfNoPrealloc is BPF_F_NO_PREALLOC, which an LPM trie requires.
const bpfNoPrealloc = 1

// newFilter creates and fills the kernel path filter of prof. It returns nil, and no
// error, when prof cannot be represented: without a filter every open is sent.
func newFilter(prof *Profile) (*ebpf.Map, error) {
	entries, ok := filterEntries(prof)
	if !ok {
		return nil, nil
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "cordon_filter", Type: ebpf.LPMTrie, KeySize: 4 + filterKeyData, ValueSize: 1,
		MaxEntries: filterMaxEntries, Flags: bpfNoPrealloc,
	})
	if err != nil {
		return nil, err
	}
	var key [4 + filterKeyData]byte
	for k, v := range entries {
		clear(key[:])
		binary.NativeEndian.PutUint32(key[:], uint32(8*len(k)))
		copy(key[4:], k)
		if err := m.Update(key[:], v, ebpf.UpdateAny); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}
