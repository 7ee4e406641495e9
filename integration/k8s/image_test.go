//go:build k8s

package k8s

import (
	"testing"

	"github.com/cordonhq/cordon/integration/k8stest"
)

// cordonBin is the cordon binary ($CORDON_BIN), with cordon-engines beside it.
func cordonBin(t *testing.T) string { return k8stest.CordonBin(t) }

// podImage is the kubernetes placement's test image ([k8stest.PodImage]).
func podImage(t *testing.T) string { return k8stest.PodImage(t) }
