// Package contract owns cordon's YAML contract: strict decoding with FILE:LINE:COL
// errors, defaults, validation, and [Compile], which turns a [Contract] into the
// backend-neutral [Plan] that everything downstream reads. Nothing outside this package
// reads YAML.
//
// The API is unstable until v1.
package contract
