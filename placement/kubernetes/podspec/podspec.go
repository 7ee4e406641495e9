package podspec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/container"
)

// Labels and annotations on every object of a session.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by" // always ManagedBy
	ManagedBy      = "cordon"
	LabelTenant    = "cordon.dev/tenant"
	LabelSession   = "cordon.dev/session"
	// AnnotationContract is the contract's digest (a label value cannot hold it).
	AnnotationContract = "cordon.dev/contract"
	// AnnotationPids is the contract's pids limit, which a Pod cannot express: the
	// node's podPidsLimit bounds it until process 1 enforces it (docs/kubernetes.md).
	AnnotationPids = "cordon.dev/pids-limit"
	// AnnotationOwner names the cordon process that runs the session (its owner
	// label and its host's boot id, "LABEL@BOOT"), for a sweep on that host to tell a
	// session whose cordon is gone (Placement.Sweep).
	AnnotationOwner = "cordon.dev/owner"
)

// Names inside the Pod.
const (
	ContainerName     = "sandbox"
	InitContainerName = "cordon-install"
	// VolumeCordon holds cordon's binary, copied there by the init container and
	// read-only in the sandbox, at [paths.SandboxDir].
	VolumeCordon    = "cordon"
	VolumeWorkspace = "workspace"
	// VolumeEmpty is an empty read-only volume mounted over every hidden path.
	VolumeEmpty = "cordon-empty"
	// VolumeControl holds process 1's control socket, at [ControlDir].
	VolumeControl = "cordon-control"
	// VolumeSecrets holds the session's credential files (deliver: file), which
	// process 1 writes there from its spec, at [paths.SandboxSecrets] as on the
	// container backends: memory only, gone with the Pod, never a Secret.
	VolumeSecrets = "cordon-secrets"
	// VolumeGate holds process 1's gate socket, at [paths.PodGateDir] (see
	// [GateSocket]).
	VolumeGate = "cordon-gate"
	// VolumeTermination holds the mount point of the kubelet's termination message
	// file, at [TerminationDir].
	VolumeTermination = "cordon-termination"
)

// GateSocket is where process 1 of a session with gates listens for `cordon gate
// NAME`: in a memory volume of its own, which commands may not write (their Landlock
// ruleset), so they can connect to the socket and never remove or replace it, and
// reached through the link at [paths.SandboxGate] that the init container makes in
// the read-only volume of cordon's binary, where the command asks on every backend.
// Its connections are relayed to the run's gate service on cordon's host
// (internal/ctlmux), as the egress proxy's are.
const GateSocket = paths.PodGate

// Process 1's control socket, which `internal attach` (exec'd by the placement through
// the API server) connects to: in a memory volume of its own, hidden from commands by
// their Landlock ruleset, and gone once cordon has attached (initspec.go).
const (
	ControlDir    = "/run/cordon-control"
	ControlSocket = ControlDir + "/init.sock"
)

// WorkspaceContainerName is the Pod's workspace sidecar: a native sidecar (an init
// container that keeps running, and ends with the sandbox container) that mounts the
// whole workspace volume read-write at WorkspaceDir, into which the placement execs
// the fill of the workspace from the host's and its pack after each command
// (placement/kubernetes Channel.Fill and Pack; sandboxinit `internal podws`). The
// commands' own mount of the volume is read-only or masked in parts, so cannot be
// filled; and a second mount in their container would be theirs too (Landlock
// grants by inode). The sidecar shares no mount or pid namespace with them.
const WorkspaceContainerName = "cordon-workspace"

// WorkspaceDir is where the workspace sidecar mounts the whole workspace volume.
const WorkspaceDir = "/run/cordon-workspace"

// WorkspaceEntries bounds the entries of a fill's or a pack's tar; their bytes are
// bounded by Config.WorkspaceBytes, the volume's size.
const WorkspaceEntries = 1 << 20

// WorkspaceCommand is what the placement execs in the workspace sidecar for op,
// "fill" or "pack", bounded as cfg says.
func WorkspaceCommand(cfg Config, op string) []string {
	cfg = cfg.withDefaults()
	return []string{cfg.InitBinary, "internal", "podws", op, WorkspaceDir,
		strconv.FormatInt(cfg.WorkspaceBytes, 10), strconv.Itoa(WorkspaceEntries)}
}

// The sandbox container's terminationMessagePath, TerminationLog, in a memory
// volume of its own at TerminationDir, hidden from commands as the control socket's
// is: the kubelet binds a file of the Pod's directory on the node there, outside
// every bound of the Pod (its volumes, its memory). At the default,
// /dev/termination-log, it was under /dev, which commands may write for its device
// nodes, and a command filled the node's disk through it. Nothing reads it: process
// 1's status is its exit code.
const (
	TerminationDir = "/run/cordon-termination"
	TerminationLog = TerminationDir + "/log"
)

// cordonVolumeBytes bounds the volume holding cordon's binary (a few MiB).
const cordonVolumeBytes = 64 << 20

// secretsVolumeBytes bounds the credential files' volume: they come in the spec,
// itself at most ctl.MaxMsg.
const secretsVolumeBytes = 1 << 20

// ErrHostPath is what Compile's refusal of a plan that shows a host path outside the
// workspace wraps: a Pod has no host view.
var ErrHostPath = errors.New("a Pod cannot show a host path")

// Session is who the objects are for.
type Session struct {
	Tenant string // the tenant's name
	ID     string // the session's id
	// Pod is the name of the session's Pod when it is not [Name](ID): a warm Pod the
	// session claimed keeps the name it was made with. Compile ignores it.
	Pod string
}

// PodName is the name of the session's Pod: Pod, or [Name](ID) for one created for
// the session.
func (s Session) PodName() string {
	if s.Pod != "" {
		return s.Pod
	}
	return Name(s.ID)
}

// Objects are what the placement creates for one session, in this order: the
// NetworkPolicy first, so that the Pod never runs without it.
type Objects struct {
	NetworkPolicy *networkingv1.NetworkPolicy
	Pod           *corev1.Pod
}

// Compile translates plan into the session's objects under cfg.
func Compile(plan *contract.Plan, s Session, cfg Config) (Objects, error) {
	if err := cfg.Validate(); err != nil {
		return Objects{}, fmt.Errorf("kubernetes placement: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := s.validate(); err != nil {
		return Objects{}, err
	}
	image := plan.Image
	if image == "" {
		image = cfg.Image
	}
	if image == "" {
		return Objects{}, errors.New("the kubernetes placement needs an image: the contract names none and the placement's config has no default image (a Pod has no host view)")
	}
	vols, mounts, err := volumes(plan, cfg)
	if err != nil {
		return Objects{}, err
	}
	meta := s.objectMeta(cfg.Namespace)
	meta.Annotations = map[string]string{AnnotationContract: plan.ContractDigest}
	if plan.Limits.Pids > 0 {
		meta.Annotations[AnnotationPids] = strconv.FormatInt(plan.Limits.Pids, 10)
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: meta,
		Spec:       podSpec(cfg),
	}
	pod.Spec.Volumes = vols
	pod.Spec.InitContainers = []corev1.Container{installContainer(cfg, PinnedFiles(plan)), workspaceContainer(cfg)}
	pod.Spec.Containers = []corev1.Container{{
		Name:                   ContainerName,
		Image:                  image,
		ImagePullPolicy:        pullPolicy(plan.Pull),
		Command:                InitCommand(),
		WorkingDir:             plan.Workdir,
		VolumeMounts:           mounts,
		Resources:              resources(plan.Limits),
		SecurityContext:        containerSecurity(cfg, localhostProfile(cfg)),
		TerminationMessagePath: TerminationLog,
	}}
	return Objects{NetworkPolicy: networkPolicy(s, cfg), Pod: pod}, nil
}

func (s Session) validate() error {
	var errs []error
	for _, msg := range validation.IsValidLabelValue(s.Tenant) {
		errs = append(errs, fmt.Errorf("tenant %q: %s", s.Tenant, msg))
	}
	if s.Tenant == "" {
		errs = append(errs, errors.New("tenant: required"))
	}
	// The id names the Pod: "cordon-" + id is a DNS label.
	for _, msg := range validation.IsDNS1123Label(Name(s.ID)) {
		errs = append(errs, fmt.Errorf("session id %q: %s", s.ID, msg))
	}
	if s.ID == "" {
		errs = append(errs, errors.New("session id: required"))
	}
	return errors.Join(errs...)
}

// Name is the name of a session's Pod and NetworkPolicy.
func Name(sessionID string) string { return "cordon-" + sessionID }

// Labels select a session's objects.
func (s Session) Labels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelTenant: s.Tenant, LabelSession: s.ID}
}

func (s Session) objectMeta(ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: Name(s.ID), Namespace: ns, Labels: s.Labels()}
}

// podSpec is the Pod's posture, before its containers and volumes.
func podSpec(cfg Config) corev1.PodSpec {
	no, yes := false, true
	grace := int64(5)
	uid, gid := cfg.UID, cfg.GID // each object its own copy
	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		// No credentials of the cluster's in the sandbox, and no list of its services.
		AutomountServiceAccountToken: &no,
		EnableServiceLinks:           &no,
		// The sandbox resolves no name itself (the egress proxy does): no cluster DNS.
		DNSPolicy:                     corev1.DNSNone,
		DNSConfig:                     &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
		Hostname:                      "cordon",
		TerminationGracePeriodSeconds: &grace,
		NodeName:                      cfg.NodeName,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsUser:    &uid,
			RunAsGroup:   &gid,
			RunAsNonRoot: &yes,
			// The sandbox container's is cordon's Localhost profile: containerSecurity.
			SeccompProfile: runtimeDefault(),
		},
	}
	if cfg.RuntimeClass != "" {
		rc := cfg.RuntimeClass
		spec.RuntimeClassName = &rc
	}
	if cfg.UserNamespaces {
		spec.HostUsers = &no
	}
	return spec
}

// containerSecurity is every container's security context: the Pod's uid, no
// capabilities, no privilege escalation, a read-only root file system, under the
// seccomp profile sp.
func containerSecurity(cfg Config, sp *corev1.SeccompProfile) *corev1.SecurityContext {
	no, yes := false, true
	uid, gid := cfg.UID, cfg.GID // each container its own copy
	return &corev1.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               &gid,
		RunAsNonRoot:             &yes,
		Privileged:               &no,
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           sp,
	}
}

// runtimeDefault is the runtime's default seccomp profile: the init container's, which
// only copies a file, and the Pod's for any container without its own.
func runtimeDefault() *corev1.SeccompProfile {
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

// localhostProfile is the sandbox container's seccomp profile: cordon's, installed on
// the node (package podseccomp), which lets process 1 make the empty network
// namespace its commands run in; cordon's own filter is stacked on every command.
func localhostProfile(cfg Config) *corev1.SeccompProfile {
	p := cfg.SeccompProfile
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}
}

// installContainer copies cordon's binary from cordon's image into the Pod, and
// makes the pinned files (see [PinnedFiles]) in the workspace volume.
func installContainer(cfg Config, pinned []string) corev1.Container {
	c := corev1.Container{
		Name:            InitContainerName,
		Image:           cfg.InitImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{cfg.InitBinary, "internal", "install", paths.SandboxInit},
		VolumeMounts:    []corev1.VolumeMount{{Name: VolumeCordon, MountPath: paths.SandboxDir}},
		Resources:       resources(contract.LimitsPlan{Memory: 64 << 20, CPU: 0.1}),
		SecurityContext: containerSecurity(cfg, runtimeDefault()),
	}
	if len(pinned) > 0 {
		c.Command = append(append(c.Command, "--pin", WorkspaceDir), pinned...)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VolumeWorkspace, MountPath: WorkspaceDir})
	}
	return c
}

// workspaceContainer is the workspace sidecar (see [WorkspaceContainerName]): cordon's
// image, as the init container, waiting for the placement's execs; restarted should
// it die, and ended by the kubelet once the sandbox container has.
func workspaceContainer(cfg Config) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	return corev1.Container{
		Name:            WorkspaceContainerName,
		Image:           cfg.InitImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{cfg.InitBinary, "internal", "podws", "wait"},
		RestartPolicy:   &always,
		VolumeMounts:    []corev1.VolumeMount{{Name: VolumeWorkspace, MountPath: WorkspaceDir}},
		Resources:       resources(contract.LimitsPlan{Memory: sidecarMemory, CPU: sidecarCPU}),
		SecurityContext: containerSecurity(cfg, runtimeDefault()),
	}
}

// The workspace sidecar's requests and limits (equal, as every container's here: the
// Pod keeps the Guaranteed class). A native sidecar's requests add to the sandbox
// container's for the scheduler, for the Pod's whole life, so they are small: a tar
// stream needs little memory, and a pack or fill of a large workspace is slowed by the
// CPU limit rather than every Pod paying for it.
const (
	sidecarMemory = 64 << 20
	sidecarCPU    = 0.05
)

// PinnedFiles are the files of the workspace volume (paths relative to it) that the
// sandbox container's subPath mounts bind: a protected file of the workspace shown
// read-only, say. Where a subPath's source is missing when the container starts, the
// kubelet makes a directory, and binds that inode for the container's life, so no
// file renamed there later is what the command sees. So the init container makes
// each one, empty, before the sandbox container starts, and a fill writes them in
// place (process 1's spec carries them).
func PinnedFiles(plan *contract.Plan) []string {
	var out []string
	for _, m := range container.ImageMounts(plan) {
		rel, inside := workspaceRel(plan.Workspace, m.Path)
		if inside && rel != "" && !m.Dir && m.Type != contract.Tmpfs && m.Type != contract.Mask {
			out = append(out, rel)
		}
	}
	return out
}

func pullPolicy(pull string) corev1.PullPolicy {
	if pull == "missing" {
		return corev1.PullIfNotPresent
	}
	return corev1.PullNever // the contract's default: never pull
}

// resources are the plan's memory and CPU limits, requested as much as limited (the
// scheduler places the Pod where they fit). The pids limit has no Pod field.
func resources(l contract.LimitsPlan) corev1.ResourceRequirements {
	rl := corev1.ResourceList{}
	if l.Memory > 0 {
		rl[corev1.ResourceMemory] = *resource.NewQuantity(l.Memory, resource.BinarySI)
	}
	if l.CPU > 0 {
		rl[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(l.CPU*1000), resource.DecimalSI)
	}
	if len(rl) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Limits: rl, Requests: rl.DeepCopy()}
}

// volumes translates the plan's mounts (those a sandbox with an image has) into the
// Pod's volumes and the sandbox's mounts, followed by cordon's binary, read-only.
func volumes(plan *contract.Plan, cfg Config) ([]corev1.Volume, []corev1.VolumeMount, error) {
	vols := []corev1.Volume{
		memoryVolume(VolumeCordon, cordonVolumeBytes),
		{Name: VolumeWorkspace, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: resource.NewQuantity(cfg.WorkspaceBytes, resource.BinarySI)}}},
	}
	var mounts []corev1.VolumeMount
	var errs []error
	empty := false
	ws := plan.Workspace
	for _, m := range container.ImageMounts(plan) {
		rel, inside := workspaceRel(ws, m.Path)
		switch {
		case m.Type == contract.Tmpfs:
			name := "tmpfs-" + strconv.Itoa(len(vols))
			vols = append(vols, memoryVolume(name, plan.Limits.Tmpfs))
			mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: m.Path})
		case m.Type == contract.Mask:
			// Hidden: an empty read-only directory in its place (nothing can be
			// created there either).
			empty = true
			mounts = append(mounts, corev1.VolumeMount{Name: VolumeEmpty, MountPath: m.Path, ReadOnly: true})
		case !inside:
			errs = append(errs, fmt.Errorf("%s (%s, %s): %w outside the workspace; name an image that holds what the command needs", m.Path, m.Access, m.Why, ErrHostPath))
		default:
			// The workspace, or a path in it shown read-only (or writable below a
			// read-only one): the workspace volume, or the same path in it.
			mounts = append(mounts, corev1.VolumeMount{Name: VolumeWorkspace, MountPath: m.Path, SubPath: rel, ReadOnly: m.Access != contract.ReadWrite})
		}
	}
	if empty {
		vols = append(vols, memoryVolume(VolumeEmpty, 1<<20))
	}
	vols = append(vols, memoryVolume(VolumeControl, 1<<20), memoryVolume(VolumeSecrets, secretsVolumeBytes),
		memoryVolume(VolumeGate, 1<<20), memoryVolume(VolumeTermination, 1<<20))
	mounts = append(mounts,
		corev1.VolumeMount{Name: VolumeCordon, MountPath: paths.SandboxDir, ReadOnly: true},
		corev1.VolumeMount{Name: VolumeSecrets, MountPath: paths.SandboxSecrets},
		corev1.VolumeMount{Name: VolumeGate, MountPath: paths.PodGateDir},
		corev1.VolumeMount{Name: VolumeControl, MountPath: ControlDir},
		corev1.VolumeMount{Name: VolumeTermination, MountPath: TerminationDir})
	return vols, mounts, errors.Join(errs...)
}

// workspaceRel is p relative to the workspace ws ("" for ws itself), and whether p is
// in it.
func workspaceRel(ws, p string) (string, bool) {
	if ws == "" {
		return "", false
	}
	if p == ws {
		return "", true
	}
	rel, ok := strings.CutPrefix(p, strings.TrimSuffix(ws, "/")+"/")
	return rel, ok
}

// memoryVolume is a private tmpfs of size bytes (0: the node's default bound, its
// memory counted against the Pod's limit).
func memoryVolume(name string, size int64) corev1.Volume {
	ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	if size > 0 {
		ed.SizeLimit = resource.NewQuantity(size, resource.BinarySI)
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}}
}

// networkPolicy denies the session's Pod every connection in and out. Defence in depth
// only: many network plugins do not enforce NetworkPolicy (the test cluster's do not);
// the sandbox's one way out is cordon's egress proxy.
func networkPolicy(s Session, cfg Config) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: s.objectMeta(cfg.Namespace),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelTenant: s.Tenant, LabelSession: s.ID}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}
