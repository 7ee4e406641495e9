//go:build !darwin

package wire

// SocketEnv is macOS's (socket_darwin.go): elsewhere the backends mount the gate
// socket at [SandboxSocket], and the environment does not move it.
const SocketEnv = "CORDON_GATE_SOCKET"

func sandboxSocket() string { return SandboxSocket }
