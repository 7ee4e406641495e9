// Package manifests holds the tests of deploy/kubernetes: the manifests for running
// cordon serve in a cluster parse strictly, grant the least the kubernetes placement
// needs, and run the server without privilege.
package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/server/config"
)

// objects are the manifests' objects by kind.
type objects struct {
	namespaces          []corev1.Namespace
	serviceAccounts     []corev1.ServiceAccount
	roles               []rbacv1.Role
	roleBindings        []rbacv1.RoleBinding
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	deployments         []appsv1.Deployment
	configMaps          []corev1.ConfigMap
	other               int // Services, PersistentVolumeClaims
}

// load parses every document of every *.yaml here strictly (an unknown field is an
// error) into its type; an unknown kind is an error too.
func load(t *testing.T) objects {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var o objects
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if err := o.add(doc); err != nil {
				t.Errorf("%s, document %d: %v", f, i, err)
			}
		}
	}
	return o
}

func (o *objects) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(doc, v) }
	var err error
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		o.namespaces, err = decodeInto(o.namespaces, strict)
	case "v1 ServiceAccount":
		o.serviceAccounts, err = decodeInto(o.serviceAccounts, strict)
	case "rbac.authorization.k8s.io/v1 Role":
		o.roles, err = decodeInto(o.roles, strict)
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		o.roleBindings, err = decodeInto(o.roleBindings, strict)
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		o.clusterRoles, err = decodeInto(o.clusterRoles, strict)
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		o.clusterRoleBindings, err = decodeInto(o.clusterRoleBindings, strict)
	case "apps/v1 Deployment":
		o.deployments, err = decodeInto(o.deployments, strict)
	case "v1 ConfigMap":
		o.configMaps, err = decodeInto(o.configMaps, strict)
	case "v1 Service":
		_, err = decodeInto([]corev1.Service(nil), strict)
		o.other++
	case "v1 PersistentVolumeClaim":
		_, err = decodeInto([]corev1.PersistentVolumeClaim(nil), strict)
		o.other++
	default:
		return errors.New("unexpected object " + tm.APIVersion + " " + tm.Kind)
	}
	return err
}

func decodeInto[T any](list []T, strict func(any) error) ([]T, error) {
	var v T
	if err := strict(&v); err != nil {
		return list, err
	}
	return append(list, v), nil
}

// grant is one thing a rule allows.
type grant struct{ group, resource, verb string }

// needed is exactly what the kubernetes placement needs: its sessions' Pods (and the
// exec stream to their process 1) and NetworkPolicies in a tenant namespace, and the
// RuntimeClass check, cluster-wide.
var (
	neededInTenant = grants(
		[]string{""}, []string{"pods"}, []string{"create", "get", "list", "watch", "update", "delete"},
		[]string{""}, []string{"pods/exec"}, []string{"create"},
		[]string{"networking.k8s.io"}, []string{"networkpolicies"}, []string{"create", "delete"},
	)
	neededClusterWide = grants([]string{"node.k8s.io"}, []string{"runtimeclasses"}, []string{"get"})
)

// grants expands triples of (groups, resources, verbs).
func grants(triples ...[]string) map[grant]bool {
	out := map[grant]bool{}
	for i := 0; i+2 < len(triples); i += 3 {
		for _, g := range triples[i] {
			for _, r := range triples[i+1] {
				for _, v := range triples[i+2] {
					out[grant{g, r, v}] = true
				}
			}
		}
	}
	return out
}

// granted is what rules allow; a wildcard, a resource name list or a non-resource
// URL is an error.
func granted(t *testing.T, who string, rules []rbacv1.PolicyRule) map[grant]bool {
	t.Helper()
	out := map[grant]bool{}
	for _, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
			if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
				t.Errorf("%s: a wildcard in %+v", who, r)
			}
		}
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: non-resource URLs %v", who, r.NonResourceURLs)
		}
		for _, v := range r.Verbs {
			if v == "escalate" || v == "bind" || v == "impersonate" {
				t.Errorf("%s: verb %s", who, v)
			}
		}
		maps.Copy(out, grants(r.APIGroups, r.Resources, r.Verbs))
	}
	return out
}

// The Roles grant exactly what the placement needs in a tenant namespace, the
// ClusterRole exactly the RuntimeClass check; no wildcard, no escalation.
func TestRBACLeastPrivilege(t *testing.T) {
	o := load(t)
	if len(o.roles) == 0 || len(o.clusterRoles) != 1 {
		t.Fatalf("%d Roles, %d ClusterRoles; want a Role per tenant namespace and one ClusterRole", len(o.roles), len(o.clusterRoles))
	}
	for _, r := range o.roles {
		got := granted(t, "Role "+r.Namespace+"/"+r.Name, r.Rules)
		if !maps.Equal(got, neededInTenant) {
			t.Errorf("Role %s/%s grants %v; want exactly %v", r.Namespace, r.Name, keys(got), keys(neededInTenant))
		}
		if !strings.HasPrefix(r.Namespace, "cordon-tenant-") {
			t.Errorf("Role %s/%s is not in a tenant namespace", r.Namespace, r.Name)
		}
	}
	for _, r := range o.clusterRoles {
		if got := granted(t, "ClusterRole "+r.Name, r.Rules); !maps.Equal(got, neededClusterWide) {
			t.Errorf("ClusterRole %s grants %v; want exactly %v", r.Name, keys(got), keys(neededClusterWide))
		}
		if r.AggregationRule != nil {
			t.Errorf("ClusterRole %s aggregates others", r.Name)
		}
	}
	checkBindings(t, o)
}

// checkBindings: every binding names a role of these manifests and binds it to
// cordon serve's ServiceAccount alone.
func checkBindings(t *testing.T, o objects) {
	t.Helper()
	if len(o.serviceAccounts) != 1 {
		t.Fatalf("%d ServiceAccounts, want 1", len(o.serviceAccounts))
	}
	sa := o.serviceAccounts[0]
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}}
	roles := map[string]bool{}
	for _, r := range o.roles {
		roles["Role "+r.Namespace+"/"+r.Name] = true
	}
	for _, r := range o.clusterRoles {
		roles["ClusterRole /"+r.Name] = true
	}
	for _, b := range o.roleBindings {
		if !roles[b.RoleRef.Kind+" "+b.Namespace+"/"+b.RoleRef.Name] || b.RoleRef.Kind != "Role" {
			t.Errorf("RoleBinding %s/%s refers to %+v, no Role of its namespace here", b.Namespace, b.Name, b.RoleRef)
		}
		if !slices.Equal(b.Subjects, want) {
			t.Errorf("RoleBinding %s/%s binds %+v; want only %+v", b.Namespace, b.Name, b.Subjects, want)
		}
	}
	for _, b := range o.clusterRoleBindings {
		if !roles[b.RoleRef.Kind+" /"+b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s refers to %+v, no ClusterRole here", b.Name, b.RoleRef)
		}
		if !slices.Equal(b.Subjects, want) {
			t.Errorf("ClusterRoleBinding %s binds %+v; want only %+v", b.Name, b.Subjects, want)
		}
	}
}

// Every request the placement makes (recorded on a fake cluster) is one the RBAC
// grants: the manifests cannot fall behind the code.
func TestRBACCoversPlacement(t *testing.T) {
	o := load(t)
	allowed := map[grant]bool{}
	for _, r := range o.roles {
		maps.Copy(allowed, granted(t, r.Name, r.Rules))
	}
	for _, r := range o.clusterRoles {
		maps.Copy(allowed, granted(t, r.Name, r.Rules))
	}
	cs := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runsc"}, Handler: "runsc"})
	p, err := kubernetes.New(cs, podspec.Config{Namespace: "cordon-tenant-acme", InitImage: "cordon:1", RuntimeClass: "runsc"})
	if err != nil {
		t.Fatal(err)
	}
	s := podspec.Session{Tenant: "acme", ID: "s-1"}
	plan := &contract.Plan{Workspace: "/w", Workdir: "/w", Image: "img:1", Mounts: []contract.Mount{{Path: "/w", Type: contract.Bind, Access: contract.ReadWrite, Dir: true}}}
	objs, err := p.Compile(plan, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Create(context.Background(), objs); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	warmPool(t, cs, p, plan)
	for _, a := range cs.Actions() {
		res := a.GetResource()
		r := res.Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		if g := (grant{res.Group, r, a.GetVerb()}); !allowed[g] {
			t.Errorf("the placement makes %+v, which the RBAC does not grant", g)
		}
	}
	if len(cs.Actions()) == 0 {
		t.Fatal("no request recorded")
	}
}

// cordon serve runs without privilege and its config is one cordon serve accepts;
// the tenant namespaces enforce the restricted Pod Security profile.
func TestServeDeployment(t *testing.T) {
	o := load(t)
	if len(o.deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(o.deployments))
	}
	spec := o.deployments[0].Spec.Template.Spec
	if spec.ServiceAccountName != o.serviceAccounts[0].Name {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, o.serviceAccounts[0].Name)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("cordon serve shares a host namespace")
	}
	if ps := spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want a non-root uid", ps)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged == nil || *sc.Privileged ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s: securityContext %+v; want no privilege, no capabilities, a read-only root", c.Name, sc)
		}
	}
	for _, cm := range o.configMaps {
		if data, ok := cm.Data["serve.yaml"]; ok {
			c, err := config.Parse(cm.Name+"/serve.yaml", []byte(data))
			if err != nil {
				t.Errorf("the ConfigMap's serve.yaml: %v", err)
				continue
			}
			for _, tn := range c.Tenants {
				k := tn.Placement.Kubernetes
				if k == nil {
					t.Errorf("tenant %s is not placed on the cluster: the Deployment cannot run sessions on its own node", tn.Name)
					continue
				}
				pc, ok := cm.Data[filepath.Base(k.Config)]
				if !ok {
					t.Errorf("tenant %s's placement config %s is not in the ConfigMap", tn.Name, k.Config)
					continue
				}
				if cfg, err := podspec.DecodeConfig([]byte(pc)); err != nil {
					t.Errorf("tenant %s's placement config: %v", tn.Name, err)
				} else if !slices.ContainsFunc(o.namespaces, func(ns corev1.Namespace) bool { return ns.Name == cfg.Namespace }) {
					t.Errorf("tenant %s's namespace %s is not among the manifests'", tn.Name, cfg.Namespace)
				}
			}
		}
	}
	tenants := 0
	for _, ns := range o.namespaces {
		if strings.HasPrefix(ns.Name, "cordon-tenant-") {
			tenants++
			if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("namespace %s does not enforce the restricted Pod Security profile", ns.Name)
			}
		}
	}
	if tenants == 0 {
		t.Error("no tenant namespace")
	}
}

func keys(m map[grant]bool) []grant {
	out := slices.Collect(maps.Keys(m))
	slices.SortFunc(out, func(a, b grant) int { return strings.Compare(a.group+a.resource+a.verb, b.group+b.resource+b.verb) })
	return out
}

// warmPool runs a warm pool on the fake cluster: it fills, one of its Pods runs and
// is claimed, a claim finds none, the claimed session is deleted, the pool closed.
func warmPool(t *testing.T, cs *fake.Clientset, p *kubernetes.Placement, plan *contract.Plan) {
	t.Helper()
	ctx := context.Background()
	// The fake sets no creationTimestamp: a Pod would be too old to claim.
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).CreationTimestamp = metav1.Now()
		return false, nil, nil
	})
	pool, err := p.NewPool(ctx, plan, "acme", kubernetes.PoolConfig{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		list, err := cs.CoreV1().Pods("cordon-tenant-acme").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			pod = list.Items[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the warm pool made no pod")
		}
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: podspec.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}}
	// Through the tracker: the kubelet's request, not the placement's.
	if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), &pod, pod.Namespace); err != nil {
		t.Fatal(err)
	}
	s, err := pool.Claim(ctx, podspec.Session{Tenant: "acme", ID: "s-2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Claim(ctx, podspec.Session{Tenant: "acme", ID: "s-3"}); !errors.Is(err, kubernetes.ErrNoWarmPod) {
		t.Fatalf("a second claim = %v, want ErrNoWarmPod", err)
	}
	if err := p.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
