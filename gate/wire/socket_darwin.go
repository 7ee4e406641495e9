package wire

import "os"

// SocketEnv names the gate socket where no mount can put it at [SandboxSocket]: a
// Seatbelt sandbox sees the host's file system, so the socket stays in the run
// directory, the profile lets the sandbox connect to it alone, and this says where.
const SocketEnv = "CORDON_GATE_SOCKET"

func sandboxSocket() string {
	if s := os.Getenv(SocketEnv); s != "" {
		return s
	}
	return SandboxSocket
}
