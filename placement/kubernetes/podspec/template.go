package podspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// Labels of warm Pods (docs/kubernetes.md, "Warm Pods").
const (
	// LabelTemplate is the hash of the template a Pod was made from ([TemplateHash]):
	// on a warm Pod, and kept by the session that claims it.
	LabelTemplate = "cordon.dev/template"
	// LabelWarm names the pool a warm Pod is waiting in; claiming the Pod removes it.
	LabelWarm = "cordon.dev/warm"
)

// TemplateHash identifies what a Pod is made from, whatever its session: its spec
// and annotations (the contract's digest, the pids limit), under its namespace and
// tenant. Sessions of the same plan under the same config share it, so a Pod made
// for the template can serve any of them: process 1 learns its session's spec at
// attach, not from the Pod. 16 hex digits, a valid label value.
func TemplateHash(pod *corev1.Pod) string {
	data, err := json.Marshal(struct {
		Namespace   string            `json:"namespace"`
		Tenant      string            `json:"tenant"`
		Annotations map[string]string `json:"annotations"`
		Spec        corev1.PodSpec    `json:"spec"`
	}{pod.Namespace, pod.Labels[LabelTenant], pod.Annotations, pod.Spec})
	if err != nil {
		// A PodSpec always marshals; a hash of nothing would match any template.
		panic("podspec: marshalling a pod spec: " + err.Error())
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
