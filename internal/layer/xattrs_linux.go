package layer

import (
	"strings"

	"github.com/cordonhq/cordon/internal/linux"
)

// An entry's extended attributes (user.*, security.* such as file capabilities,
// system.posix_acl_* ACLs, trusted.*) are part of what it is: a checkpoint keeps an
// upper entry's, a rollback restores want's, and an upper entry is a copy of the
// workspace's only with the same ones (copyOf). The overlay's own (trusted.overlay.*,
// and user.overlay.* on an overlay of user attributes) are the overlay's metadata,
// not the entry's: the overlay neither shows nor lets anyone set them through it.

// xattrNamesMax and xattrBytesMax bound what is read of one entry's extended
// attributes: names, and bytes of their values in all (one value may be 64 KiB, the
// kernel's bound). The sandbox can set many on each entry it makes; past them, a
// checkpoint keeps none of the entry's and a rollback restores none, each saying so,
// and the copy rule takes the entry for no copy.
const (
	xattrNamesMax = 128
	xattrBytesMax = 64 << 10
)

// overlayAttr reports whether name is one of the overlay's own attributes.
func overlayAttr(name string) bool {
	return strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.overlay.")
}

// entryAttrs is attrs without the overlay's own.
func entryAttrs(attrs []linux.Xattr) []linux.Xattr {
	out := attrs[:0:0]
	for _, a := range attrs {
		if !overlayAttr(a.Name) {
			out = append(out, a)
		}
	}
	return out
}
