// Package integration holds cordon's end-to-end tests: the real cordon binary, real
// Bubblewrap sandboxes, attacks that must fail for the right reason. Under CI=true
// nothing here may skip.
//
// Files are grouped by the property their tests attack, one package (shared helpers,
// one build of the binary), named <group>_<topic>_test.go with the group first. A
// test keeps the name of its attack; a new attack goes in the group of what it
// attacks, in the file of its topic (or a new topic file past ~600 lines):
//
//   - fs_: the file system: writes and reads outside the grant, denials and links,
//     .git and nested repositories, files the host executes later, the contract
//     itself, the run root and state paths (fs_seatbelt_darwin: the same on macOS).
//   - pid1_: cordon's process 1 and the run's lifetime: reaching process 1 from a
//     command, its posture (doctor), killing cordon or the run, timeouts, container
//     lifecycle, teardown when process 1 or the engine is broken from the host.
//   - kernel_: kernel interfaces: capabilities, user namespaces, sysctls and /proc/sys,
//     seccomp, cgroups, set-id files, host root through containers and idmaps,
//     limits and per-uid leases, and the eBPF monitor (kernel_monitor*: evading it,
//     the control socket, the pinned programs).
//   - egress_: the network: the proxy and its handed-over listener, what a denial
//     says, smuggling, deny and allow floods, exfiltration past the budget, and
//     credentials echoed back by a host (egress_scrub).
//   - creds_: the credential broker: a credential lives exactly as long as its run,
//     is revoked after a kill, a failing provider refuses the run, and the proxy
//     delivers one (creds_proxy). The caller's own secrets never reach the sandbox.
//   - audit_: the record: the hash-chained log, export, report and output paths,
//     audit follow, and the diff the log holds (complete, bounded, metadata).
//   - gates_: gates: approval and denial, who asked, and what a hostile sandbox does
//     to a gate (the repository it pushes, floods of requests).
//   - stage_: staged runs: the stage and its bounds, apply against conflicts, links
//     and hostile entries, repositories, the apply's log, staged sessions, checkpoints
//     and rollbacks.
//   - session_: sessions: state kept between execs and the end of a session, cordon
//     exec and its results, per-command cgroups and containers.
//
// Tests that attack nothing: cli_ (commands, flags, cordon diff and check, the GitHub
// action, whose hostile pull requests are in cli_action), docs_ (docs that run and
// their convention) and setup_ (backends, engines, images, and setup_containers,
// which runs the escape tests of the groups above on every container backend).
// helpers_*_test.go hold what every group uses: the world, the attack binary, the
// leftover checks. A _linux_ or _darwin_ suffix goes last: pid1_seatbelt_darwin_test.go.
package integration
