//go:build !unix

package fsdiff

// oNonblock is not needed where FIFOs cannot be opened by path.
const oNonblock = 0
