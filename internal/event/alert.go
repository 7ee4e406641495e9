package event

// SyscallAlertBody is the body of syscall.alert, which the eBPF monitor emits once per
// deviation from the run's profile (see docs/monitor.md).
type SyscallAlertBody struct {
	PID     int      `json:"pid"`              // process (thread group) id, host pid namespace
	PPID    int      `json:"ppid"`             // its parent
	UID     int      `json:"uid"`              // its user id, host user namespace
	Comm    string   `json:"comm"`             // its command name (as the kernel has it, ≤ 15 bytes)
	Cgroup  uint64   `json:"cgroup"`           // its cgroup v2 id
	Syscall string   `json:"syscall"`          // execve, openat, connect, ptrace, …
	Path    string   `json:"path,omitempty"`   // file: the path compared (absolute, cleaned); exec: the file run
	Access  string   `json:"access,omitempty"` // opens: "read" or "write"
	Addr    string   `json:"addr,omitempty"`   // connect: "IP:PORT", "[IP6]:PORT", "unix:/path" or "unix:@abstract"
	Argv    []string `json:"argv,omitempty"`   // exec: the new program's argv
	Detail  string   `json:"detail,omitempty"` // other syscalls: their arguments, decoded
	Rule    string   `json:"rule"`             // which part of the profile was broken: exec, read, write, connect, syscall
	// Category is the kind of deviation, which the workload is shown: it names nothing of
	// the contract ("write to a read-only path"); Reason does.
	Category string `json:"category,omitempty"`
	Reason   string `json:"reason"` // why, in words
	Action   string `json:"action"` // what was done: "alert" (the syscall ran)
}
