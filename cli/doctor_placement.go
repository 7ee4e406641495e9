//go:build !noengines || !linux

package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	placement "github.com/cordonhq/cordon/placement/kubernetes"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// doctorPodTimeout bounds the measure of a Pod: its creation, start, attach and the
// posture command. The Pod is deleted afterwards in any case.
const doctorPodTimeout = 3 * time.Minute

// doctorPodEnv is the posture command's environment in the Pod.
var doctorPodEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"}

// doctorPlacement is `cordon doctor --placement kubernetes`: the posture of a
// session's Pod on the cluster, measured from inside as on every backend. Exit status
// as doctor's: 0 every check passed, 1 one failed, 125 the Pod could not be made to
// run or be reached.
func doctorPlacement(ctx context.Context, stdio IO, o doctorOptions) error {
	root, err := auditRoot(envOr("CORDON_AUDIT_DIR", ""))
	if err != nil {
		return reportRunError(stdio, err)
	}
	plan, _, err := planOf(o.file, root, nil)
	if err != nil {
		return reportRunError(stdio, err)
	}
	cfg, err := podspec.ReadConfig(o.placementConfig)
	if err != nil {
		return reportRunError(stdio, errdefs.Invalidf("%w", err))
	}
	rc, err := placement.RESTConfig(o.kubeconfig)
	if err != nil {
		return reportRunError(stdio, err)
	}
	p, err := placement.NewFromConfig(rc, cfg)
	if err != nil {
		return reportRunError(stdio, err)
	}
	d := podPosture(ctx, p, rc, plan, cfg)
	d.Backend, d.View = "kubernetes", "a session's Pod in namespace "+cfg.Namespace
	if img := podImage(plan, cfg); img != "" {
		d.View += ", image " + img
	}
	if cfg.RuntimeClass != "" {
		d.View += ", runtime class " + cfg.RuntimeClass
	}
	report := doctorReport{Schema: schemaDoctor, Version: doctorVersion, Backends: []doctorBackend{d}}
	printDoctor(stdio, report, o.asJSON)
	return doctorExit(report)
}

// podImage is the image a session's Pod runs.
func podImage(plan *contract.Plan, cfg podspec.Config) string {
	if plan.Image != "" {
		return plan.Image
	}
	return cfg.Image
}

// podPosture creates a session's Pod for plan, waits until it runs, attaches to its
// process 1, runs the posture command as the session's command, and deletes the Pod.
func podPosture(ctx context.Context, p *placement.Placement, rc *rest.Config, plan *contract.Plan, cfg podspec.Config) (d doctorBackend) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	s := podspec.Session{Tenant: "doctor", ID: "doctor-" + hex.EncodeToString(b[:])}
	objs, err := p.Compile(plan, s)
	if err != nil {
		return doctorBackend{Error: errdefs.Message(err)}
	}
	ctx, cancel := context.WithTimeout(ctx, doctorPodTimeout)
	defer cancel()
	if err := p.Create(ctx, objs); err != nil {
		return doctorBackend{Error: errdefs.Message(err)}
	}
	defer func() {
		if err := p.Delete(ctx, s); err != nil && d.Error == "" {
			d = doctorBackend{Error: "measured, but " + errdefs.Message(err)}
		}
	}()
	if err := p.WaitRunning(ctx, s); err != nil {
		return doctorBackend{Error: errdefs.Message(err)}
	}
	spec := podspec.InitSpec(plan, cfg, doctorPodEnv)
	ch, err := p.Attach(ctx, rc, s, spec)
	if err != nil {
		return doctorBackend{Error: errdefs.Message(err)}
	}
	defer ch.Close()
	var stdout, stderr bytes.Buffer
	code, err := ch.Run(ctx, postureArgv(spec.Writable), spec.Dir, nil, &stdout, &stderr)
	if err != nil {
		return doctorBackend{Error: fmt.Sprintf("the posture command: %s", errdefs.Message(err))}
	}
	return decodePosture(&stdout, stderr.String(), code)
}
