// Package sandboxinit is cordon's own process 1 inside a sandbox, the same static binary on
// every backend. It reads its [wire.Spec] from the host, proves the sandbox (no network
// interface but loopback, no capabilities, nothing writable that the contract did not
// grant), reports the proof on a status pipe, then runs the command: it forwards
// signals, reaps every orphan, and exits with the command's status.
package sandboxinit
