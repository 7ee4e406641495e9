package seatbelt

import (
	"path/filepath"

	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// A session's process 1 is cordon's own binary (`cordon internal init`, the darwin
// variant in sandboxinit) started under sandbox-exec with the session's profile, so
// that every command it forks inherits the profile. It dials the runner's control
// socket in the run directory (internal/ctl; a stream socket on macOS) and serves the
// commands the runner sends, each in a process group of its own. macOS has no
// subreaper: what a command's processes leave behind is reparented to launchd, and
// process 1 kills, when the runner hangs up, the process groups it made. Those groups
// are the boundary: a process that leaves its group (setsid, setpgid) or that kills
// process 1 (they share the sandbox) escapes that kill.

// session allows what process 1 needs beyond the plan: executing cordon's binary and
// connecting to the control socket. Both are the last rules, so no carve-out of the
// plan's narrows them. A run (no Control) gets neither.
func (g *gen) session() {
	if g.params.Control == "" {
		return
	}
	w := &g.w
	w.blank()
	w.comment("Session: process 1 is cordon's binary; it connects to the runner's control socket.")
	w.rule("allow", []string{"process-exec", "file-read*", "file-map-executable"}, literal(g.res.resolve(g.params.Init)))
	w.rule("allow", []string{"network-outbound"}, filter{"unix-socket", g.res.resolve(g.params.Control)})
	if g.params.Spill != "" {
		w.comment("The whole output of commands whose output was cut, at its host path.")
		w.rule("allow", []string{"file-read*"}, subpath(g.res.resolve(g.params.Spill)))
	}
}

// Gates: no mount puts the gate socket at sandbox.GatePath or cordon's binary in
// sandbox.GateBinDir, so the socket stays in the run directory (its path in the
// environment, wire.SocketEnv) and GateBinDir on PATH is moved to RunDir/bin, which
// holds a link named cordon to Init. The profile lets the sandbox read that directory,
// execute Init and connect to the gate socket, nothing more of the run directory.

// gateBin is the directory standing in for sandbox.GateBinDir.
const gateBin = "bin"

// gates allows `cordon gate`: the link and Init, and the gate socket.
func (g *gen) gates() {
	if g.params.Gate == "" {
		return
	}
	bin := filepath.Join(g.runDir, gateBin)
	g.dirs = append(g.dirs, PrivateDir{For: sandbox.GateBinDir, Host: bin})
	w := &g.w
	w.blank()
	w.comment("Gates: `cordon gate` is a link to cordon's binary in %s; it connects to the gate socket.", gateBin)
	w.rule("allow", []string{"file-read*"}, subpath(bin))
	w.rule("allow", []string{"process-exec", "file-read*", "file-map-executable"}, literal(g.res.resolve(g.params.Init)))
	w.rule("allow", []string{"network-outbound"}, filter{"unix-socket", g.res.resolve(g.params.Gate)})
}

// sessionParams fills the profile parameters of a session and of gates from host.
func sessionParams(p *Params, host sandbox.Host) {
	if host.ControlSocket != "" || host.GateSocket != "" {
		p.Init = host.Init
	}
	p.Control, p.Gate, p.Spill = host.ControlSocket, host.GateSocket, host.SpillDir
}

// gateEnv is env with the gate socket's path, when there is one.
func gateEnv(env []string, host sandbox.Host) []string {
	if host.GateSocket == "" {
		return env
	}
	return append(env, wire.SocketEnv+"="+host.GateSocket)
}
