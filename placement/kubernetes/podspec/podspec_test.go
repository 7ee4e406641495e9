package podspec

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/paths"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testPlan is a plan as contract.Compile makes it for a contract with an image:
// @system rows (left out), private tmpfs, the workspace, a read-only and a hidden
// path inside it.
func testPlan() *contract.Plan {
	return &contract.Plan{
		Version:        contract.PlanVersion,
		ContractDigest: "sha256:0123",
		Workspace:      "/src/proj",
		Workdir:        "/src/proj",
		Home:           "/home/agent",
		Image:          "example.com/build:1",
		Pull:           "never",
		Mounts: []contract.Mount{
			{Path: "/etc", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Why: "@system"},
			{Path: "/home/agent", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true, Why: "empty private $HOME"},
			{Path: "/tmp", Type: contract.Tmpfs, Access: contract.ReadWrite, Dir: true, Why: "private /tmp"},
			{Path: "/etc/shadow", Type: contract.Mask, Why: "@system never shows host secrets"},
			{Path: "/src/proj", Type: contract.Bind, Access: contract.ReadWrite, Dir: true, Why: "filesystem.writable"},
			{Path: "/src/proj/.env", Type: contract.Mask, Create: contract.PlaceholderFile, Why: "filesystem.deny_read"},
			{Path: "/src/proj/.git", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Why: "filesystem.deny_write"},
		},
		Limits: contract.LimitsPlan{Memory: 1 << 30, Pids: 256, CPU: 1.5, Tmpfs: 1 << 30},
	}
}

func testConfig() Config {
	return Config{Namespace: "tenant-acme", InitImage: "cordon/init:1", UID: 1000, GID: 1000}
}

var testSession = Session{Tenant: "acme", ID: "s-0a1b2c"}

func compile(t *testing.T, plan *contract.Plan, cfg Config) Objects {
	t.Helper()
	objs, err := Compile(plan, testSession, cfg)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return objs
}

func sandbox(t *testing.T, o Objects) corev1.Container {
	t.Helper()
	if len(o.Pod.Spec.Containers) != 1 {
		t.Fatalf("containers = %d, want 1", len(o.Pod.Spec.Containers))
	}
	return o.Pod.Spec.Containers[0]
}

// seccomp checks a container's seccomp profile: the sandbox's is cordon's Localhost
// profile (process 1 makes a network namespace under it), the init container's the
// runtime's default.
func seccomp(container string, sp *corev1.SeccompProfile) (c struct {
	what string
	ok   bool
}) {
	if container != ContainerName {
		c.what, c.ok = "seccomp RuntimeDefault", sp != nil && sp.Type == corev1.SeccompProfileTypeRuntimeDefault
		return c
	}
	c.what = "seccomp Localhost " + DefaultSeccompProfile
	c.ok = sp != nil && sp.Type == corev1.SeccompProfileTypeLocalhost && sp.LocalhostProfile != nil && *sp.LocalhostProfile == DefaultSeccompProfile
	return c
}

// Every container, the init containers included, runs in the locked posture, and so
// does the Pod: each property is checked on its own, so dropping one fails.
func TestPosture(t *testing.T) {
	o := compile(t, testPlan(), testConfig())
	ps := o.Pod.Spec.SecurityContext
	if ps == nil || ps.RunAsUser == nil || *ps.RunAsUser != 1000 || ps.RunAsGroup == nil || *ps.RunAsGroup != 1000 {
		t.Errorf("pod runAsUser/runAsGroup = %v, want 1000:1000", ps)
	}
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Error("pod runAsNonRoot is not true")
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	all := append(slices.Clone(o.Pod.Spec.InitContainers), o.Pod.Spec.Containers...)
	if len(all) != 3 { // install, the workspace sidecar, the sandbox
		t.Fatalf("containers + init containers = %d, want 3", len(all))
	}
	for _, c := range all {
		sc := c.SecurityContext
		if sc == nil {
			t.Fatalf("%s: no securityContext", c.Name)
		}
		checks := []struct {
			what string
			ok   bool
		}{
			{"runAsUser 1000", sc.RunAsUser != nil && *sc.RunAsUser == 1000},
			{"runAsGroup 1000", sc.RunAsGroup != nil && *sc.RunAsGroup == 1000},
			{"runAsNonRoot", sc.RunAsNonRoot != nil && *sc.RunAsNonRoot},
			{"privileged false", sc.Privileged != nil && !*sc.Privileged},
			{"allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
			{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
			{"capabilities drop ALL, add none", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0},
			seccomp(c.Name, sc.SeccompProfile),
		}
		for _, ch := range checks {
			if !ch.ok {
				t.Errorf("%s: securityContext lacks %s: %+v", c.Name, ch.what, sc)
			}
		}
	}
	spec := o.Pod.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not false")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks is not false")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the pod shares a host namespace")
	}
	if spec.DNSPolicy != corev1.DNSNone {
		t.Errorf("dnsPolicy = %q, want None (no cluster DNS)", spec.DNSPolicy)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q, want Never", spec.RestartPolicy)
	}
}

// Process 1 is cordon's binary, copied from cordon's image by the init container into
// a volume the sandbox sees read-only.
func TestProcessOneIsCordon(t *testing.T) {
	o := compile(t, testPlan(), testConfig())
	c := sandbox(t, o)
	if len(c.Command) == 0 || c.Command[0] != paths.SandboxInit {
		t.Errorf("command = %q, want cordon's binary %s first", c.Command, paths.SandboxInit)
	}
	if len(c.Args) != 0 {
		t.Errorf("args = %q, want none (the image's entrypoint must not run)", c.Args)
	}
	if !hasMount(c, VolumeCordon, paths.SandboxDir, true) {
		t.Errorf("no read-only mount of %s at %s: %+v", VolumeCordon, paths.SandboxDir, c.VolumeMounts)
	}
	in := o.Pod.Spec.InitContainers[0]
	if in.Image != "cordon/init:1" || !slices.Equal(in.Command, []string{DefaultInitBinary, "internal", "install", paths.SandboxInit}) {
		t.Errorf("init container = %s %q, want cordon's image installing itself at %s", in.Image, in.Command, paths.SandboxInit)
	}
	if !hasMount(in, VolumeCordon, paths.SandboxDir, false) {
		t.Errorf("init container does not write the %s volume: %+v", VolumeCordon, in.VolumeMounts)
	}
	if c.Image != "example.com/build:1" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image = %s (%s), want the contract's, never pulled", c.Image, c.ImagePullPolicy)
	}
	if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
		t.Errorf("process 1 has an environment: %v %v", c.Env, c.EnvFrom)
	}
}

func TestPullMissing(t *testing.T) {
	p := testPlan()
	p.Pull = "missing"
	if got := sandbox(t, compile(t, p, testConfig())).ImagePullPolicy; got != corev1.PullIfNotPresent {
		t.Errorf("pull missing: imagePullPolicy = %s, want IfNotPresent", got)
	}
}

// The workspace is an emptyDir at the host path; what the plan shows read-only in it
// is the same path of the volume, read-only; what it hides is an empty read-only
// directory; each tmpfs is a memory volume of the tmpfs size; @system is not mounted.
// The whole volume is mounted nowhere else in the sandbox container.
func TestMounts(t *testing.T) {
	o := compile(t, testPlan(), testConfig())
	c := sandbox(t, o)
	byPath := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if _, dup := byPath[m.MountPath]; dup {
			t.Errorf("two mounts at %s", m.MountPath)
		}
		byPath[m.MountPath] = m
	}
	want := map[string]corev1.VolumeMount{
		"/src/proj":      {Name: VolumeWorkspace, MountPath: "/src/proj"},
		"/src/proj/.git": {Name: VolumeWorkspace, MountPath: "/src/proj/.git", SubPath: ".git", ReadOnly: true},
		"/src/proj/.env": {Name: VolumeEmpty, MountPath: "/src/proj/.env", ReadOnly: true},
		paths.SandboxDir: {Name: VolumeCordon, MountPath: paths.SandboxDir, ReadOnly: true},
	}
	for p, w := range want {
		if got, ok := byPath[p]; !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("mount at %s = %+v, want %+v", p, got, w)
		}
	}
	for _, p := range []string{"/etc", "/etc/shadow", WorkspaceDir} {
		if _, ok := byPath[p]; ok {
			t.Errorf("@system's %s is mounted: the image provides the system", p)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range o.Pod.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
		vols[v.Name] = v
	}
	for _, p := range []string{"/tmp", "/home/agent"} {
		m, ok := byPath[p]
		if !ok || m.ReadOnly {
			t.Errorf("no writable tmpfs at %s", p)
			continue
		}
		ed := vols[m.Name].EmptyDir
		if ed == nil || ed.Medium != corev1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.Value() != 1<<30 {
			t.Errorf("%s: volume %+v, want a memory emptyDir of 1 GiB", p, vols[m.Name])
		}
	}
	ws := vols[VolumeWorkspace].EmptyDir
	if ws == nil || ws.SizeLimit == nil || ws.SizeLimit.Value() != DefaultWorkspaceBytes {
		t.Errorf("workspace volume = %+v, want an emptyDir bounded at the default", vols[VolumeWorkspace])
	}
	if c.WorkingDir != "/src/proj" {
		t.Errorf("workingDir = %q, want the plan's", c.WorkingDir)
	}
}

// A plan that shows a host path outside the workspace is refused, with the path.
func TestHostPathRefused(t *testing.T) {
	p := testPlan()
	p.Mounts = append(p.Mounts, contract.Mount{Path: "/opt/sdk", Type: contract.Bind, Access: contract.ReadOnly, Dir: true, Why: "filesystem.readable"})
	_, err := Compile(p, testSession, testConfig())
	if !errors.Is(err, ErrHostPath) || !strings.Contains(err.Error(), "/opt/sdk") {
		t.Fatalf("Compile = %v, want ErrHostPath naming /opt/sdk", err)
	}
}

func TestNoImageRefused(t *testing.T) {
	p := testPlan()
	p.Image = ""
	if _, err := Compile(p, testSession, testConfig()); err == nil || !strings.Contains(err.Error(), "needs an image") {
		t.Fatalf("Compile without an image = %v, want a refusal", err)
	}
	cfg := testConfig()
	cfg.Image = "example.com/default:2"
	if got := sandbox(t, compile(t, p, cfg)).Image; got != cfg.Image {
		t.Errorf("image = %s, want the config's default %s", got, cfg.Image)
	}
}

// The contract's memory and CPU limits are the sandbox's limits and requests; the
// pids limit, which no Pod field holds, is recorded.
func TestLimits(t *testing.T) {
	o := compile(t, testPlan(), testConfig())
	r := sandbox(t, o).Resources
	for _, rl := range []corev1.ResourceList{r.Limits, r.Requests} {
		if q := rl[corev1.ResourceMemory]; q.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("memory = %s, want 1Gi", q.String())
		}
		if q := rl[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1500m")) != 0 {
			t.Errorf("cpu = %s, want 1500m", q.String())
		}
	}
	if got := o.Pod.Annotations[AnnotationPids]; got != "256" {
		t.Errorf("pids annotation = %q, want 256", got)
	}
	p := testPlan()
	p.Limits = contract.LimitsPlan{}
	if r := sandbox(t, compile(t, p, testConfig())).Resources; len(r.Limits) != 0 || len(r.Requests) != 0 {
		t.Errorf("no limits in the plan, resources = %+v", r)
	}
}

func TestRuntimeClassAndUserNamespace(t *testing.T) {
	o := compile(t, testPlan(), testConfig())
	if o.Pod.Spec.RuntimeClassName != nil || o.Pod.Spec.HostUsers != nil {
		t.Errorf("unset config: runtimeClassName %v, hostUsers %v, want neither", o.Pod.Spec.RuntimeClassName, o.Pod.Spec.HostUsers)
	}
	cfg := testConfig()
	cfg.RuntimeClass, cfg.UserNamespaces = "gvisor", true
	o = compile(t, testPlan(), cfg)
	if rc := o.Pod.Spec.RuntimeClassName; rc == nil || *rc != "gvisor" {
		t.Errorf("runtimeClassName = %v, want gvisor", rc)
	}
	if hu := o.Pod.Spec.HostUsers; hu == nil || *hu {
		t.Errorf("hostUsers = %v, want false", hu)
	}
}

// Both objects carry the tenant and session; the NetworkPolicy selects exactly the
// session's Pod and denies it every connection in and out.
func TestLabelsAndNetworkPolicy(t *testing.T) {
	o := compile(t, testPlan(), testConfig())
	for _, labels := range []map[string]string{o.Pod.Labels, o.NetworkPolicy.Labels} {
		if labels[LabelTenant] != "acme" || labels[LabelSession] != "s-0a1b2c" || labels[LabelManagedBy] != ManagedBy {
			t.Errorf("labels = %v, want tenant, session and managed-by", labels)
		}
	}
	if o.Pod.Namespace != "tenant-acme" || o.NetworkPolicy.Namespace != "tenant-acme" {
		t.Errorf("namespaces %q, %q, want the tenant's", o.Pod.Namespace, o.NetworkPolicy.Namespace)
	}
	np := o.NetworkPolicy.Spec
	sel := np.PodSelector.MatchLabels
	if len(sel) != 2 || sel[LabelTenant] != "acme" || sel[LabelSession] != "s-0a1b2c" || len(np.PodSelector.MatchExpressions) != 0 {
		t.Errorf("podSelector = %+v, want the session's labels", np.PodSelector)
	}
	for k, v := range sel {
		if o.Pod.Labels[k] != v {
			t.Errorf("the policy's selector %s=%s does not match the pod", k, v)
		}
	}
	if !slices.Equal(np.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes = %v, want Ingress and Egress", np.PolicyTypes)
	}
	if len(np.Ingress) != 0 || len(np.Egress) != 0 {
		t.Errorf("the policy allows something: ingress %v, egress %v", np.Ingress, np.Egress)
	}
}

func TestInvalidInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Session
		cfg  Config
		want string
	}{
		{"no namespace", testSession, Config{InitImage: "i"}, "namespace"},
		{"bad namespace", testSession, Config{Namespace: "Acme_1", InitImage: "i"}, "namespace"},
		{"no init image", testSession, Config{Namespace: "a"}, "initImage"},
		{"root uid", testSession, Config{Namespace: "a", InitImage: "i", UID: -1}, "uid"},
		{"bad runtime class", testSession, Config{Namespace: "a", InitImage: "i", RuntimeClass: "Run/sc"}, "runtimeClass"},
		{"absolute seccomp profile", testSession, Config{Namespace: "a", InitImage: "i", SeccompProfile: "/etc/p.json"}, "seccompProfile"},
		{"seccomp profile outside", testSession, Config{Namespace: "a", InitImage: "i", SeccompProfile: "../p.json"}, "seccompProfile"},
		{"unclean seccomp profile", testSession, Config{Namespace: "a", InitImage: "i", SeccompProfile: "cordon//p.json"}, "seccompProfile"},
		{"no tenant", Session{ID: "x"}, testConfig(), "tenant"},
		{"bad session id", Session{Tenant: "acme", ID: "../x"}, testConfig(), "session id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(testPlan(), tc.s, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile = %v, want an error about %s", err, tc.want)
			}
		})
	}
}

// The config's seccompProfile is the sandbox container's Localhost profile.
func TestSeccompProfileConfig(t *testing.T) {
	cfg := testConfig()
	cfg.SeccompProfile = "cordon/custom.json"
	sp := compile(t, testPlan(), cfg).Pod.Spec.Containers[0].SecurityContext.SeccompProfile
	if sp == nil || sp.Type != corev1.SeccompProfileTypeLocalhost || sp.LocalhostProfile == nil || *sp.LocalhostProfile != cfg.SeccompProfile {
		t.Errorf("the sandbox's seccompProfile is %+v, want Localhost %s", sp, cfg.SeccompProfile)
	}
}

// The YAML is deterministic and matches testdata/pod.golden.yaml (go test -update).
func TestYAMLGolden(t *testing.T) {
	cfg := testConfig()
	cfg.RuntimeClass, cfg.UserNamespaces = "gvisor", true
	first, err := compile(t, testPlan(), cfg).YAML()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := compile(t, testPlan(), cfg).YAML()
		if err != nil || !bytes.Equal(again, first) {
			t.Fatalf("the YAML differs between two compiles (%v)", err)
		}
	}
	if bytes.Contains(first, []byte("creationTimestamp")) || bytes.Contains(first, []byte("status:")) {
		t.Errorf("the YAML holds server-set fields:\n%s", first)
	}
	golden := filepath.Join("testdata", "pod.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, first, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, want) {
		t.Errorf("YAML differs from %s (go test -update):\n%s", golden, first)
	}
}

func hasMount(c corev1.Container, vol, path string, ro bool) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == vol && m.MountPath == path && m.ReadOnly == ro
	})
}

func TestDecodeConfig(t *testing.T) {
	cfg, err := DecodeConfig([]byte("version: 1\nnamespace: acme\ninitImage: cordon:1\nruntimeClass: runsc\nuserNamespaces: true\nuid: 2000\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Namespace: "acme", InitImage: "cordon:1", RuntimeClass: "runsc", UserNamespaces: true, UID: 2000}
	if cfg != want {
		t.Errorf("DecodeConfig = %+v, want %+v", cfg, want)
	}
	for name, in := range map[string]string{
		"unknown field": "version: 1\nnamespace: acme\nprivileged: true\n",
		"no version":    "namespace: acme\n",
		"wrong version": "version: 2\nnamespace: acme\n",
		"too large":     "version: 1\n#" + strings.Repeat("x", MaxConfigBytes),
	} {
		if _, err := DecodeConfig([]byte(in)); err == nil {
			t.Errorf("%s: DecodeConfig accepted %.40q", name, in)
		}
	}
}

// The workspace sidecar mounts the whole workspace volume read-write, runs cordon's
// binary from cordon's image as the Pod's other containers do (restricted), is a
// native sidecar (it ends with the sandbox container) started after the install
// container; the sandbox container mounts no such thing. A protected file of the
// workspace is made by the install container before the sandbox container starts.
func TestWorkspaceSidecar(t *testing.T) {
	plan := testPlan()
	o := compile(t, plan, testConfig())
	ics := o.Pod.Spec.InitContainers
	if len(ics) != 2 || ics[0].Name != InitContainerName || ics[1].Name != WorkspaceContainerName {
		t.Fatalf("init containers %v; want the install container, then the workspace sidecar", ics)
	}
	ws := ics[1]
	if ws.RestartPolicy == nil || *ws.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("the workspace sidecar is not a native sidecar (restartPolicy Always)")
	}
	want := []corev1.VolumeMount{{Name: VolumeWorkspace, MountPath: WorkspaceDir}}
	if !reflect.DeepEqual(ws.VolumeMounts, want) || ws.Image != testConfig().InitImage ||
		!reflect.DeepEqual(ws.SecurityContext, ics[0].SecurityContext) || ws.Command[len(ws.Command)-1] != "wait" {
		t.Errorf("workspace sidecar = %+v", ws)
	}
	cmd := WorkspaceCommand(testConfig(), "pack")
	if cmd[len(cmd)-4] != "pack" || cmd[len(cmd)-3] != WorkspaceDir || cmd[len(cmd)-2] != strconv.FormatInt(DefaultWorkspaceBytes, 10) {
		t.Errorf("WorkspaceCommand = %q", cmd)
	}
	for _, c := range o.Pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if m.Name == VolumeWorkspace && m.SubPath == "" && m.MountPath != plan.Workspace {
				t.Errorf("container %s mounts the whole workspace volume at %s", c.Name, m.MountPath)
			}
		}
	}
}
