package runner

import "github.com/cordonhq/cordon/runner/sandbox"

// The contract between the runner and its backends lives in package sandbox, which the
// backends import instead of this package. These are aliases while the lifecycle is
// rewritten; removed by the lead.
type (
	Backend        = sandbox.Backend
	Host           = sandbox.Host
	SecretFile     = sandbox.SecretFile
	Process        = sandbox.Process
	Sandbox        = sandbox.Sandbox
	CommandCgroups = sandbox.CommandCgroups
	CommandCgroup  = sandbox.CommandCgroup
)

// Paths and addresses inside every sandbox (aliases while the lifecycle is rewritten;
// removed by the lead).
const (
	ControlPath = sandbox.ControlPath
	SpillPath   = sandbox.SpillPath
	GatePath    = sandbox.GatePath
	GateBinDir  = sandbox.GateBinDir
	BridgeAddr  = sandbox.BridgeAddr
)
