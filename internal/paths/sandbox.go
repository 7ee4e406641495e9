package paths

// Paths inside every sandbox: what cordon mounts there, on every backend (seatbelt,
// which cannot mount, maps each to a host path of the run's). Every one is below
// [SandboxDir], which no contract can grant or expose (it is read-only inside, and the
// host's /run/cordon is never shown to a sandbox).
const (
	// SandboxDir is cordon's directory inside the sandbox, read-only.
	SandboxDir = "/run/cordon"
	// SandboxInit is cordon's binary, process 1 (and `cordon internal posture`).
	SandboxInit = SandboxDir + "/cordon"
	// SandboxSecrets holds the credential files (deliver: file) and the CA bundle: a
	// private tmpfs, each file mode 0400.
	SandboxSecrets = SandboxDir + "/secrets"
	// SandboxControl is a session's control socket, which process 1 dials.
	SandboxControl = SandboxDir + "/control.sock"
	// SandboxSpill holds a session's spill files (whole outputs cut for the agent).
	SandboxSpill = SandboxDir + "/spill"
	// SandboxGate is the socket `cordon gate NAME` asks on, in a sandbox with gates.
	SandboxGate = SandboxDir + "/gate.sock"
	// SandboxGateBin is the directory (appended to PATH) holding that `cordon`.
	SandboxGateBin = SandboxDir + "/bin"
)

// Paths of a Kubernetes Pod only, below [SandboxDir] (which the Pod's install
// container fills: sandboxinit `internal install`).
const (
	// PodGateDir is the Pod's gate volume, where process 1 listens on [PodGate]:
	// writable by process 1, never by a command.
	PodGateDir = SandboxDir + "/gate"
	// PodGate is the Pod's gate socket; [SandboxGate] is a link to it.
	PodGate = PodGateDir + "/gate.sock"
)

// Process 1's own files in [SandboxDir] on the container backends (names in it): its
// spec, its environment pipe and its status pipe. They are hidden from every command.
const (
	InitSpec   = "spec.json"
	InitEnv    = "env"
	InitStatus = "status"
)
