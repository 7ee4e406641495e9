// Package container is what cordon's container backends (runner/docker and
// runner/containerd) share: the translation of a [contract.Plan] into the container's
// mount table (OCI runtime-spec mounts), the paths and command of cordon's process 1
// inside, the labels on everything a run creates, and the list of engine mounts that
// pid1's self-check accepts as writable. This file is pure: the same input gives the
// same output (golden-tested); the few effects (the init directory, the owner record
// for gc) are in host_linux.go.
//
// A container's root file system is either the contract's image or, when the
// contract names none, an empty skeleton holding only the plan's symbolic links (the
// "host view"): then the plan's host paths, @system included, are mounted exactly as
// the bwrap backend mounts them, so the same escape tests hold for every backend.
package container

import (
	"archive/tar"
	"bytes"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// Paths inside every container.
const (
	InitDir  = paths.SandboxDir  // the init directory, read-only
	InitPath = paths.SandboxInit // cordon's static binary, process 1
	// SecretsDir holds the credential files (deliver: file): a private tmpfs that
	// pid1 fills from what the host sends it through a pipe.
	SecretsDir = paths.SandboxSecrets
)

// Labels on every container, task and snapshot a run creates.
const (
	LabelRun      = "cordon.run"      // the run id
	LabelContract = "cordon.contract" // the contract's digest
	// LabelOwner is "PID:START" of the cordon process that created the object (START
	// is the process start time in clock ticks, against pid reuse): gc removes objects
	// whose owner is gone.
	LabelOwner = "cordon.owner"
)

// MaskedPaths are the kernel files and directories hidden in every container: the
// engines' default list (Docker 20.10+, containerd 1.7), passed explicitly to both so
// that the self-check's allowance below names exactly what is mounted.
var MaskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
	"/proc/timer_stats", "/sys/devices/virtual/powercap", "/sys/firmware",
}

// ReadonlyPaths are the kernel paths made read-only in every container (the engines'
// default list).
var ReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// Input is what one container is built from.
type Input struct {
	Plan *contract.Plan
	Host sandbox.Host
	// HostInitDir is the host directory shown read-only at [InitDir]: pid1's spec and
	// its environment and status FIFOs (see [wire.PrepareDir]).
	HostInitDir string
	// UID and GID run process 1 and the command and own its private tmpfs mounts
	// ([HostIDs] sets them).
	UID, GID int
	// Dedicated is set when UID:GID is the host uid leased to the run
	// (sandbox.Host.UID) because root owns the workspace or another writable
	// source: every writable source another uid owns is then bound from an idmapped
	// mount ([MountIdmapped]), so that the container is never host root and what it
	// writes there is stored as the source's owner's.
	Dedicated bool
	// Idmapped maps the plan's writable sources that MountIdmapped idmapped to the
	// host path of their idmapped mount, under the run directory: they, and what the
	// plan mounts inside them, are bound from there.
	Idmapped map[string]string
	// Image is set when the root file system comes from the contract's image. The
	// image then provides the system paths: the host's @system paths are not mounted.
	Image bool
	// StagedRoot, for a staged run, is the host path of the workspace's overlay
	// (MountStage): the workspace and the plan's mounts inside it are bound from there.
	StagedRoot string
}

// Argv is the container's command: cordon's process 1 reading [InitDir].
func Argv() []string {
	return []string{InitPath, "internal", "init", "--dir", InitDir} // wire.DirFlag (Linux only)
}

// selected returns the plan's mounts this container has: all of them, except with an
// image, which provides the system paths itself: then mounts that come from @system
// are left out, and so are masks inside them (they hide host secrets the image does
// not have). Other host paths the contract names stay, read-only or read-write as the
// plan says.
func (in Input) selected() []contract.Mount {
	if !in.Image {
		return in.Plan.Mounts
	}
	var out []contract.Mount
	dropped := map[string]bool{}
	for i, m := range in.Plan.Mounts {
		switch {
		case m.Type == contract.Tmpfs:
		// The contract names the origin of each mount in Why; @system's start with it.
		case strings.HasPrefix(m.Why, "@system"):
			dropped[m.Path] = true
			continue
		case m.Type == contract.Mask:
			if p := enclosing(in.Plan.Mounts[:i], m.Path); p != "" && dropped[p] {
				dropped[m.Path] = true
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// ImageMounts are the plan's mounts a sandbox whose root file system is the contract's
// image has: what [Mounts] translates for the container backends, and what the
// kubernetes placement (placement/kubernetes/podspec) translates into a Pod's volumes.
func ImageMounts(plan *contract.Plan) []contract.Mount {
	return Input{Plan: plan, Image: true}.selected()
}

// enclosing returns the deepest of ms strictly above p, or "".
func enclosing(ms []contract.Mount, p string) string {
	best := ""
	for _, m := range ms {
		if m.Path != p && within(p, m.Path) && len(m.Path) > len(best) {
			best = m.Path
		}
	}
	return best
}

// Mounts returns the container's mounts for the plan, parents before what is mounted
// inside them, followed by the init directory. Engine mounts (/proc, /dev, /sys) are
// not included.
func Mounts(in Input) []specs.Mount {
	var out []specs.Mount
	for _, m := range in.selected() {
		switch m.Type {
		case contract.Tmpfs:
			mode := "0700"
			if m.Path == "/tmp" {
				mode = "1777"
			}
			opts := []string{"nosuid", "nodev", "mode=" + mode, "uid=" + strconv.Itoa(in.UID), "gid=" + strconv.Itoa(in.GID)}
			if in.Plan.Limits.Tmpfs > 0 {
				opts = append(opts, "size="+strconv.FormatInt(in.Plan.Limits.Tmpfs, 10))
			}
			out = append(out, specs.Mount{Destination: m.Path, Type: "tmpfs", Source: "tmpfs", Options: opts})
		case contract.Mask:
			src := in.Host.MaskFile
			if m.Dir {
				src = in.Host.MaskDir
			}
			out = append(out, bind(src, m.Path, true))
		case contract.Bind:
			out = append(out, bind(in.source(m.Path), m.Path, m.Access != contract.ReadWrite))
		}
	}
	out = append(out, bind(in.HostInitDir, InitDir, true), bind(in.Host.Init, InitPath, true))
	if in.Host.ControlSocket != "" {
		// Read-only is enough to connect to a socket, and keeps it from being replaced.
		out = append(out, bind(in.Host.ControlSocket, sandbox.ControlPath, true))
	}
	if in.Host.SpillDir != "" {
		out = append(out, bind(in.Host.SpillDir, sandbox.SpillPath, true))
	}
	if in.Host.GateSocket != "" {
		out = append(out, bind(in.Host.GateSocket, sandbox.GatePath, true), bind(in.Host.Init, sandbox.GateBinDir+"/cordon", true))
	}
	if len(in.Host.SecretFiles) > 0 {
		out = append(out, specs.Mount{Destination: SecretsDir, Type: "tmpfs", Source: "tmpfs", Options: []string{
			"nosuid", "nodev", "noexec", "mode=0700", "uid=" + strconv.Itoa(in.UID), "gid=" + strconv.Itoa(in.GID),
		}})
	}
	return out
}

// source is the host path a bind of the plan's path p comes from: p itself, its
// place in the staged overlay for the workspace and what is inside it, or its place in
// the deepest idmapped source it lies in.
func (in Input) source(p string) string {
	ws := in.Plan.Workspace
	switch {
	case in.StagedRoot == "":
	case p == ws:
		return in.StagedRoot
	case strings.HasPrefix(p, ws+"/"):
		return in.StagedRoot + p[len(ws):]
	}
	best := ""
	for src := range in.Idmapped {
		if (p == src || strings.HasPrefix(p, src+"/")) && len(src) > len(best) {
			best = src
		}
	}
	if best == "" {
		return p
	}
	return in.Idmapped[best] + p[len(best):]
}

func bind(src, dst string, ro bool) specs.Mount {
	access := "rw"
	if ro {
		access = "ro"
	}
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rprivate", "nosuid", "nodev", access}}
}

// Links are the symbolic links the host view's skeleton root holds (none with an
// image, which has its own).
func Links(in Input) []contract.Link {
	if in.Image {
		return nil
	}
	return in.Plan.Links
}

// Writable is what pid1's self-check accepts as read-write mount points: the plan's
// writable mounts that this container has, plus engine mounts listed with why each is
// safe.
func Writable(in Input, engine ...string) []string {
	var out []string
	for _, m := range in.selected() {
		if m.Access == contract.ReadWrite {
			out = append(out, m.Path)
		}
	}
	if len(in.Host.SecretFiles) > 0 {
		out = append(out, SecretsDir) // the run's own credential files, in a private tmpfs
	}
	// The engines hide a masked file by binding /dev/null over it, read-write:
	// writes to it are discarded, and reads give nothing.
	out = append(out, MaskedPaths...)
	return append(out, engine...)
}

// Spec is pid1's spec for one command in this container.
func Spec(in Input, p sandbox.Process, writable []string) wire.Spec {
	dir := p.Dir
	if dir == "" {
		dir = in.Plan.Workdir
	}
	// The image's root is read-only and all of it may be read; Landlock keeps writes
	// to the granted paths. The container runs the workspace owner's uid, or
	// cordon's dedicated one when root owns a writable source: never root.
	sp := wire.Spec{Argv: p.Argv, Dir: dir, Writable: writable, Read: []string{"/"}, Write: in.Plan.Writable(), HostUID: in.UID,
		// A command holding the status FIFO would keep process 1 from seeing cordon die.
		Hide: []string{InitDir + "/" + wire.DirStatus, InitDir + "/" + wire.DirEnv, InitDir + "/" + wire.DirSpec}}
	if in.Host.ControlSocket != "" {
		// Process 1 hands the egress listener over on it (and, in a session, takes
		// commands there).
		sp.Control = &wire.Control{Socket: sandbox.ControlPath, Token: in.Host.ControlToken}
		sp.Egress = sandbox.ProxyAddr
	}
	sp.Serve = p.Serve
	return sp
}

// Labels are the labels of everything the run creates.
func Labels(in Input, owner string) map[string]string {
	return map[string]string{
		LabelRun:      in.Host.RunID,
		LabelContract: in.Plan.ContractDigest,
		LabelOwner:    owner,
	}
}

// Name is the name of the run's container (and containerd snapshot): engines accept
// [A-Za-z0-9] runs joined by single '.', '_' or '-'.
func Name(runID string) string {
	return "cordon-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, runID)
}

// Skeleton is the host view's root file system as a tar archive: the plan's symbolic
// links and the directories the engines mount on. Docker imports it as an image.
func Skeleton(in Input) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"dev", "etc", "proc", "run", "sys", "tmp"} {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch})
	}
	for _, l := range Links(in) {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(l.Path, "/"), Linkname: l.Target, Mode: 0o777, ModTime: epoch})
	}
	_ = tw.Close()
	return buf.Bytes()
}

func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
