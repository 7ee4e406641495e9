package podspec

import (
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Sessions of one plan under one config share a template, so a warm Pod can serve
// any of them; a change of plan, config or tenant is another template.
func TestTemplateHash(t *testing.T) {
	hash := func(s Session, cfg Config, mutate func(*Objects)) string {
		t.Helper()
		objs, err := Compile(testPlan(), s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if mutate != nil {
			mutate(&objs)
		}
		return TemplateHash(objs.Pod)
	}
	base := hash(testSession, testConfig(), nil)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(base) || len(validation.IsValidLabelValue(base)) != 0 {
		t.Fatalf("TemplateHash = %q, want 16 hex digits, a label value", base)
	}
	if h := hash(Session{Tenant: "acme", ID: "s-other", Pod: "cordon-warm-x"}, testConfig(), nil); h != base {
		t.Errorf("another session of the same template: %s, want %s", h, base)
	}
	other := testConfig()
	other.RuntimeClass = "gvisor"
	for name, h := range map[string]string{
		"another tenant": hash(Session{Tenant: "other", ID: testSession.ID}, testConfig(), nil),
		"another config": hash(testSession, other, nil),
		"another image":  hash(testSession, testConfig(), func(o *Objects) { o.Pod.Spec.Containers[0].Image = "other:1" }),
		"another digest": hash(testSession, testConfig(), func(o *Objects) { o.Pod.Annotations[AnnotationContract] = "sha256:0" }),
	} {
		if h == base {
			t.Errorf("%s: the same template hash %s", name, h)
		}
	}
}
