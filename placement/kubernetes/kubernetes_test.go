package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/ctlmux"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
	"github.com/cordonhq/cordon/runner/sandbox"
)

var session = podspec.Session{Tenant: "acme", ID: "s-1"}

func plan() *contract.Plan {
	return &contract.Plan{Workspace: "/w", Workdir: "/w", Image: "img:1", Pull: "never", Mounts: []contract.Mount{
		{Path: "/w", Type: contract.Bind, Access: contract.ReadWrite, Dir: true},
	}}
}

func config(class string) podspec.Config {
	return podspec.Config{Namespace: "acme", InitImage: "cordon:1", RuntimeClass: class}
}

func objects(t *testing.T, p *Placement) podspec.Objects {
	t.Helper()
	objs, err := p.Compile(plan(), session)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// A RuntimeClass the cluster lacks refuses the session before anything is created.
func TestMissingRuntimeClassRefused(t *testing.T) {
	cs := fake.NewClientset()
	p, err := New(cs, config("runsc"))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Create(context.Background(), objects(t, p))
	if !errors.Is(err, ErrNoRuntimeClass) || !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), `"runsc"`) {
		t.Fatalf("Create = %v, want ErrNoRuntimeClass naming runsc", err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" {
			t.Errorf("after the refusal the placement created %s", a.GetResource().Resource)
		}
	}
}

// With the RuntimeClass present, Create makes the NetworkPolicy, then the Pod.
func TestCreateOrder(t *testing.T) {
	cs := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runsc"}, Handler: "runsc"})
	p, err := New(cs, config("runsc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Create(context.Background(), objects(t, p)); err != nil {
		t.Fatal(err)
	}
	var created []string
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" {
			created = append(created, a.GetResource().Resource)
		}
	}
	if strings.Join(created, ",") != "networkpolicies,pods" {
		t.Errorf("created %v, want networkpolicies then pods", created)
	}
	pod, err := cs.CoreV1().Pods("acme").Get(context.Background(), podspec.Name(session.ID), metav1.GetOptions{})
	if err != nil || *pod.Spec.RuntimeClassName != "runsc" {
		t.Fatalf("pod: %v, %v", pod, err)
	}
	// Delete removes both and, run again, is no error.
	for range 2 {
		if err := p.Delete(context.Background(), session); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("acme").Get(context.Background(), podspec.Name(session.ID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("network policy after Delete: %v, want NotFound", err)
	}
}

// A Pod the API server refuses leaves no NetworkPolicy behind.
func TestPodRefusedLeavesNothing(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "x", errors.New("refused"))
	})
	p, err := New(cs, config(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Create(context.Background(), objects(t, p)); !apierrors.IsForbidden(err) {
		t.Fatalf("Create = %v, want the API server's refusal", err)
	}
	list, err := cs.NetworkingV1().NetworkPolicies("acme").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("network policies left: %v (%v)", list, err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := New(fake.NewClientset(), podspec.Config{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("New with an empty config = %v, want ErrInvalid", err)
	}
}

// The relay in the Pod accepts an egress listener on ctlmux.ProxyAddr only: it must
// be the proxy address every backend's commands are given.
func TestProxyAddr(t *testing.T) {
	if ctlmux.ProxyAddr != sandbox.ProxyAddr {
		t.Fatalf("ctlmux.ProxyAddr %s, sandbox.ProxyAddr %s", ctlmux.ProxyAddr, sandbox.ProxyAddr)
	}
}

// The relay in the Pod accepts a gate listener on ctlmux.GateSocket only: it must be
// the socket the Pod's process 1 listens on, in the Pod's gate volume.
func TestGateSocket(t *testing.T) {
	if ctlmux.GateSocket != podspec.GateSocket {
		t.Fatalf("ctlmux.GateSocket %s, podspec.GateSocket %s", ctlmux.GateSocket, podspec.GateSocket)
	}
}
