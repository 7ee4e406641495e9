package monitor

import (
	"encoding/binary"
	"errors"

	"github.com/cilium/ebpf"
)

// bpfNoPrealloc is BPF_F_NO_PREALLOC, which an LPM trie requires.
const bpfNoPrealloc = 1

// filterSpec describes a slot's kernel path filter (struct filter in bpf/maps.h).
func filterSpec() *ebpf.MapSpec {
	return &ebpf.MapSpec{
		Name: "cordon_filter", Type: ebpf.LPMTrie, KeySize: 4 + filterKeyData, ValueSize: 1,
		MaxEntries: filterMaxEntries, Flags: bpfNoPrealloc,
	}
}

// refill makes the path filter m hold exactly entries: every key not among them is
// deleted, then every entry written.
func refill(m *ebpf.Map, entries map[string]uint8) error {
	want := make(map[[4 + filterKeyData]byte]uint8, len(entries))
	for k, v := range entries {
		var key [4 + filterKeyData]byte
		binary.NativeEndian.PutUint32(key[:], uint32(8*len(k)))
		copy(key[4:], k)
		want[key] = v
	}
	var stale [][4 + filterKeyData]byte
	var key [4 + filterKeyData]byte
	var v uint8
	it := m.Iterate()
	for it.Next(&key, &v) {
		if w, ok := want[key]; !ok || w != v {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	for k, v := range want {
		if err := m.Update(k, v, ebpf.UpdateAny); err != nil {
			return err
		}
	}
	return nil
}
