// Package integration holds cordon's end-to-end tests: the real cordon binary, real
// Bubblewrap sandboxes, attacks that must fail for the right reason. Under CI=true
// nothing here may skip.
package integration
