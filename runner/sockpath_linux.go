package runner

// maxSocketPath is the longest path a unix socket can be bound at (sun_path is 108
// bytes with its terminating NUL).
const maxSocketPath = 107
