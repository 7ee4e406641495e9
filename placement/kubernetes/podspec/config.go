package podspec

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/cordonhq/cordon/internal/paths"
)

// Defaults of [Config]'s zero fields.
const (
	DefaultUID            = 65532
	DefaultInitBinary     = "/cordon-init"
	DefaultWorkspaceBytes = 4 << 30
	// DefaultSeccompProfile is the sandbox container's Localhost seccomp profile,
	// relative to the kubelet's seccomp directory (<kubelet root>/seccomp): the file
	// `cordon internal seccomp-profile` prints (package podseccomp). Its name carries
	// the profile's version, which changes whenever the profile does.
	DefaultSeccompProfile = "cordon/pod-v1.json"
)

// Config is how the kubernetes placement places a tenant's sessions. Zero fields mean
// the defaults; [Config.Validate] says what is wrong with the rest.
type Config struct {
	// Namespace is the tenant's namespace, which holds its sessions' Pods. Required.
	Namespace string `json:"namespace"`
	// Image is the Pod's image when the contract names none. A Pod has no host view:
	// with neither, Compile refuses.
	Image string `json:"image,omitempty"`
	// InitImage is cordon's own image, which holds cordon's static binary at
	// InitBinary: an init container copies it into the Pod, where it is process 1.
	// Required.
	InitImage string `json:"initImage"`
	// InitBinary is the path of cordon's binary in InitImage (default /cordon-init).
	InitBinary string `json:"initBinary,omitempty"`
	// UID and GID run every process of the Pod (default 65532 each); never 0.
	UID int64 `json:"uid,omitempty"`
	GID int64 `json:"gid,omitempty"`
	// RuntimeClass is the Pod's runtimeClassName ("" for the cluster's default
	// runtime), such as gVisor's runsc. The placement refuses to create a Pod whose
	// class the cluster does not have.
	RuntimeClass string `json:"runtimeClass,omitempty"`
	// UserNamespaces says the cluster runs Pods in a user namespace of their own
	// (hostUsers: false): its kubelet and runtime support it. Off by default, since a
	// kubelet without the support refuses such Pods.
	UserNamespaces bool `json:"userNamespaces,omitempty"`
	// NodeName binds the Pods to one node, for a cluster without a scheduler (the
	// test cluster). Empty: the scheduler places them.
	NodeName string `json:"nodeName,omitempty"`
	// WorkspaceBytes bounds the workspace volume (default 4 GiB).
	WorkspaceBytes int64 `json:"workspaceBytes,omitempty"`
	// SeccompProfile is the sandbox container's Localhost seccomp profile, a path
	// relative to the kubelet's seccomp directory on every node the Pods may run on
	// (default [DefaultSeccompProfile]). A node's administrator installs it there; a
	// node without the file fails the Pod when its container is created.
	SeccompProfile string `json:"seccompProfile,omitempty"`
}

// withDefaults is c with its zero fields set.
func (c Config) withDefaults() Config {
	if c.InitBinary == "" {
		c.InitBinary = DefaultInitBinary
	}
	if c.UID == 0 {
		c.UID = DefaultUID
	}
	if c.GID == 0 {
		c.GID = DefaultUID
	}
	if c.WorkspaceBytes == 0 {
		c.WorkspaceBytes = DefaultWorkspaceBytes
	}
	if c.SeccompProfile == "" {
		c.SeccompProfile = DefaultSeccompProfile
	}
	return c
}

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	for _, msg := range validation.IsDNS1123Label(c.Namespace) {
		errs = append(errs, fmt.Errorf("namespace %q: %s", c.Namespace, msg))
	}
	if c.InitImage == "" {
		errs = append(errs, errors.New("initImage: required (cordon's image, holding its static binary)"))
	}
	if c.UID < 0 || c.GID < 0 {
		errs = append(errs, fmt.Errorf("uid:gid %d:%d: want positive ids (0 is the default, never root)", c.UID, c.GID))
	}
	if c.RuntimeClass != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.RuntimeClass) {
			errs = append(errs, fmt.Errorf("runtimeClass %q: %s", c.RuntimeClass, msg))
		}
	}
	if c.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
			errs = append(errs, fmt.Errorf("nodeName %q: %s", c.NodeName, msg))
		}
	}
	if c.WorkspaceBytes < 0 {
		errs = append(errs, fmt.Errorf("workspaceBytes %d: want a positive size", c.WorkspaceBytes))
	}
	if p := c.SeccompProfile; p != "" && (!filepath.IsLocal(p) || path.Clean(p) != p || strings.ContainsAny(p, "\\\x00") || len(p) > 255) {
		errs = append(errs, fmt.Errorf("seccompProfile %q: want a clean relative path below the kubelet's seccomp directory", p))
	}
	return errors.Join(errs...)
}

// ConfigVersion is the version a placement config file must declare.
const ConfigVersion = 1

// MaxConfigBytes bounds a placement config file.
const MaxConfigBytes = 64 << 10

// DecodeConfig decodes a placement config file: `version: 1` and the fields of
// [Config], strictly (an unknown field is an error). It does not validate.
func DecodeConfig(data []byte) (Config, error) {
	if len(data) > MaxConfigBytes {
		return Config{}, fmt.Errorf("placement config: %d bytes, at most %d", len(data), MaxConfigBytes)
	}
	var f struct {
		Version int `json:"version"`
		Config
	}
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return Config{}, fmt.Errorf("placement config: %w", err)
	}
	if f.Version != ConfigVersion {
		return Config{}, fmt.Errorf("placement config: version %d, want %d", f.Version, ConfigVersion)
	}
	return f.Config, nil
}

// ReadConfig reads and decodes the placement config in file (at most
// [MaxConfigBytes] are read; DecodeConfig refuses more). The file must be trusted
// ([paths.ReadTrusted]): whoever can change it chooses where and how sandboxes run.
func ReadConfig(file string) (Config, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return Config{}, fmt.Errorf("reading the placement config: %w", err)
	}
	data, err := paths.ReadTrusted(abs, MaxConfigBytes+1)
	if err != nil {
		return Config{}, fmt.Errorf("reading the placement config (whoever can change it chooses where and how sandboxes run): %w", err)
	}
	cfg, err := DecodeConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", file, err)
	}
	return cfg, nil
}
