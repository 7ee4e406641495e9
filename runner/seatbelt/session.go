package seatbelt

import "github.com/cordonhq/cordon/runner/sandbox"

// A session's process 1 is cordon's own binary (`cordon internal init`, the darwin
// variant in internal/pid1) started under sandbox-exec with the session's profile, so
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
}

// sessionParams fills the profile parameters of a session from host.
func sessionParams(p *Params, host sandbox.Host) {
	if host.ControlSocket != "" {
		p.Control, p.Init = host.ControlSocket, host.Init
	}
}
