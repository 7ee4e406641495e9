// Package policy is cordon's egress allowlist: a pure matcher, with no I/O, that decides
// whether a sandboxed process may reach a destination host and port, and why.
//
// A [Policy] is built from the contract's egress [Rule]s by [New] and is immutable, so it is
// safe for concurrent use by multiple goroutines. The proxy asks it twice per connection:
//
//  1. [Policy.Decide] with only the requested host and port. An IP literal is decided
//     outright ([Allow] or [Deny]); a DNS name that may be allowed yields [Resolve], which
//     means "look the name up and ask again for each address", never "dial the name".
//  2. [Policy.Decide] again with each resolved address in [DecideArgs.Addr]. Only an
//     [Allow] here lets the proxy dial, and it dials exactly that address.
//
// Security reasoning, in short:
//   - The zero [Verdict] is [Deny]; a nil or empty Policy denies everything.
//   - Hosts are normalised once ([Normalize]) and the normalised form is the one that is
//     matched, resolved and compared with TLS SNI, so the checked name is the used name.
//     Anything that is not a plain LDH name or a canonical IP literal is rejected rather than
//     guessed at: userinfo, fragments, percent escapes, and the non-canonical IPv4 spellings
//     that C resolvers accept ("127.1", "0x7f.1", "2130706433", "0177.0.0.1").
//   - A host rule vouches for a name, not for where it points: a name that resolves to a
//     loopback, private, link-local (cloud metadata), CGNAT, multicast, unspecified or
//     otherwise special address is denied unless a cidr rule names that address. This stops
//     DNS rebinding and "allowed.example resolves to 169.254.169.254" tricks.
//
// The package is unstable until cordon v1.
package policy
