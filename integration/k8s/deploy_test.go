//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// deployDir holds the manifests for running cordon serve in a cluster.
var deployDir = filepath.Join("..", "..", "deploy", "kubernetes")

// The manifests' namespaces and RBAC, applied to the real API server, grant the
// server's ServiceAccount exactly what the placement does: acting as that account, a
// session's whole life (create, wait until it runs, attach, a command, delete) works
// in the tenant's namespace, and nothing past it: no Secret, no other namespace, no
// patch of a Pod (deploy/kubernetes/manifests_test.go holds the same
// grants to a fake cluster's record of the placement's requests). The namespaces are
// left in place: the test cluster has no namespace controller to finish deleting them.
func TestDeployRBACOnCluster(t *testing.T) {
	cs, rc := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	objs := manifests(t, "namespace.yaml", "rbac.yaml")
	var tenantNS, saName, saNS string
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			if o.Labels["pod-security.kubernetes.io/enforce"] == "restricted" {
				tenantNS = o.Name
			}
		case *corev1.ServiceAccount:
			saName, saNS = o.Name, o.Namespace
		}
		apply(ctx, t, cs, o)
	}
	if tenantNS == "" || saName == "" {
		t.Fatalf("the manifests name no restricted tenant namespace (%q) or no ServiceAccount (%q)", tenantNS, saName)
	}
	// No controller-manager: the namespace's default ServiceAccount, which admission
	// requires of a Pod, is made here.
	apply(ctx, t, cs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: tenantNS}})
	asServer := rest.CopyConfig(rc)
	asServer.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + saNS + ":" + saName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"},
	}
	server, err := kubernetes.NewForConfig(asServer)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v", err)
	}
	image := podImage(t)
	plan := testPlan(t, image)
	cfg := podspec.Config{Namespace: tenantNS, InitImage: image, NodeName: nodes.Items[0].Name, UID: testUID, GID: testUID}
	p, err := placement.New(server, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := podspec.Session{Tenant: "acme", ID: sessionID(t)}
	compiled, err := p.Compile(plan, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Create(ctx, compiled); err != nil {
		t.Fatalf("creating a session's objects as %s: %v", saName, err)
	}
	defer func() {
		if err := p.Delete(context.Background(), s); err != nil {
			t.Errorf("deleting the session's objects as %s: %v", saName, err)
		}
	}()
	if err := p.WaitRunning(ctx, s); err != nil {
		t.Fatalf("waiting as %s: %v%s", saName, err, describe(ctx, cs, tenantNS, podspec.Name(s.ID)))
	}
	ch, err := p.Attach(ctx, asServer, s, podspec.InitSpec(plan, cfg, podEnv))
	if err != nil {
		t.Fatalf("attaching as %s: %v", saName, err)
	}
	var out bytes.Buffer
	code, err := ch.Run(ctx, []string{"/bin/echo", "placed"}, plan.Workspace, nil, &out, nil)
	ch.Close()
	if err != nil || code != 0 || out.String() != "placed\n" {
		t.Errorf("a command as %s: status %d, output %q, %v; want 0 and \"placed\"", saName, code, out.String(), err)
	}

	// Nothing past it.
	for what, try := range map[string]func() error{
		"reading the tenant's secrets": func() error {
			_, err := server.CoreV1().Secrets(tenantNS).List(ctx, metav1.ListOptions{})
			return err
		},
		"creating a pod in another namespace": func() error {
			_, err := server.CoreV1().Pods("default").Create(ctx, compiled.Pod, metav1.CreateOptions{})
			return err
		},
		"patching a pod": func() error {
			_, err := server.CoreV1().Pods(tenantNS).Patch(ctx, compiled.Pod.Name, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"cordon.dev/session":"stolen"}}}`), metav1.PatchOptions{})
			return err
		},
		"listing runtime classes": func() error {
			_, err := server.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{})
			return err
		},
		"reading config maps": func() error {
			_, err := server.CoreV1().ConfigMaps(tenantNS).List(ctx, metav1.ListOptions{})
			return err
		},
	} {
		if err := try(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s: %v, want Forbidden", what, saName, err)
		}
	}
}

// manifests decodes the named files of deploy/kubernetes, every document of each.
func manifests(t *testing.T, files ...string) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	sep := regexp.MustCompile(`(?m)^---\s*$`)
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range sep.Split(string(data), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, obj)
		}
	}
	return out
}

// apply creates o, or updates it when it exists (a previous run's), as the admin.
func apply(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, o runtime.Object) {
	t.Helper()
	var err error
	switch o := o.(type) {
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		if _, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().Roles(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
		}
	case *rbacv1.RoleBinding:
		if _, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
		}
	case *rbacv1.ClusterRole:
		if _, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().ClusterRoles().Update(ctx, o, metav1.UpdateOptions{})
		}
	case *rbacv1.ClusterRoleBinding:
		if _, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().ClusterRoleBindings().Update(ctx, o, metav1.UpdateOptions{})
		}
	default:
		t.Fatalf("applying a %T: not a kind these manifests hold", o)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("applying %T: %v", o, err)
	}
}
