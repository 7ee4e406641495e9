package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/placement/kubernetes/podspec"
)

// ErrPodFailed: the session's Pod ended, or the kubelet cannot start its sandbox
// container (a missing seccomp profile, an image it may not pull, a config it
// refuses), so it will never run.
var ErrPodFailed = errors.New("the session's pod cannot run")

// stuckReasons are the waiting reasons of a container that the kubelet will not start
// without a change to the Pod or the node; any other (ContainerCreating, a pull in
// progress) may still end in a running container.
var stuckReasons = map[string]bool{
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
	"ErrImageNeverPull": true, "InvalidImageName": true, "ImageInspectError": true,
}

// WaitRunning waits until the sandbox container of session s's Pod runs, watching the
// Pod (a watch the API server ends is opened again) until ctx ends. It fails with
// [ErrPodFailed] when the Pod ended or its init or sandbox container is stuck.
func (p *Placement) WaitRunning(ctx context.Context, s podspec.Session) error {
	name := s.PodName()
	pods := p.client.CoreV1().Pods(p.cfg.Namespace)
	for {
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return errdefs.Unavailablef("waiting for pod %s/%s to run: %w", p.cfg.Namespace, name, err)
		}
		opened := time.Now()
		done, err := watchRunning(ctx, w)
		w.Stop()
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", p.cfg.Namespace, name, err)
		}
		if done {
			return nil
		}
		if time.Since(opened) < time.Second { // not a tight loop on a watch refused at once
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// watchRunning reads w until the Pod's sandbox container runs (true), the Pod cannot
// run (an error), or the watch ends (false).
func watchRunning(ctx context.Context, w watch.Interface) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, errdefs.Unavailablef("waiting for it to run: %w", ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if ev.Type == watch.Deleted {
				return false, fmt.Errorf("%w: it was deleted", ErrPodFailed)
			}
			if done, err := podRunning(pod); done || err != nil {
				return done, err
			}
		}
	}
}

// podRunning reports whether pod's sandbox container runs, or why it never will.
func podRunning(pod *corev1.Pod) (bool, error) {
	if ended(pod) {
		return false, fmt.Errorf("%w: it ended %s %s", ErrPodFailed, pod.Status.Reason, pod.Status.Message)
	}
	for _, c := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if w := c.State.Waiting; w != nil && stuckReasons[w.Reason] {
			return false, fmt.Errorf("%w: container %s: %s: %s", ErrPodFailed, c.Name, w.Reason, w.Message)
		}
	}
	return running(pod), nil
}

// outputWait bounds how long Run waits, after a command's exit, for the rest of its
// output: a background child that inherited stdout would otherwise hold it open.
const outputWait = 2 * time.Second

// Run runs argv in dir in the session, as one exec request on the channel, with stdin
// (nil: empty) and its output copied to stdout and stderr, and returns its exit
// status. Run takes the channel's receiving side for the command's life: calls are
// serialised, and nothing else may read ch.Conn meanwhile. When ctx ends first, Run
// returns its error and the command is left to the session's end (close the channel).
func (ch *Channel) Run(ctx context.Context, argv []string, dir string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	ch.runMu.Lock()
	defer ch.runMu.Unlock()
	ch.runID++
	ch.ran = true
	id := ch.runID
	var fds [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			ctl.CloseFiles(fds[:i])
			return 0, err
		}
		fds[i], fds[i+1] = r, w
	}
	err := ch.Conn.Send(ctl.Msg{Op: ctl.OpExec, ID: id, Argv: argv, Dir: dir}, fds[0], fds[3], fds[5])
	ctl.CloseFiles([]*os.File{fds[0], fds[3], fds[5]})
	if err != nil {
		ctl.CloseFiles([]*os.File{fds[1], fds[2], fds[4]})
		return 0, errdefs.Unavailablef("sending the command: %w", err)
	}
	go func() {
		if stdin != nil {
			_, _ = io.Copy(fds[1], stdin)
		}
		fds[1].Close()
	}()
	var copies sync.WaitGroup
	for _, c := range []struct {
		r *os.File
		w io.Writer
	}{{fds[2], stdout}, {fds[4], stderr}} {
		if c.w == nil {
			c.w = io.Discard
		}
		copies.Add(1)
		go func() { defer copies.Done(); _, _ = io.Copy(c.w, c.r) }()
	}
	code, err := ch.waitExit(ctx, id)
	copied := make(chan struct{})
	go func() { copies.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(outputWait):
	}
	fds[2].Close()
	fds[4].Close()
	<-copied
	return code, err
}

// waitExit reads the channel until exec id's exit, or ctx ends.
func (ch *Channel) waitExit(ctx context.Context, id uint64) (int, error) {
	stop := context.AfterFunc(ctx, func() { _ = ch.UC.SetReadDeadline(time.Now()) })
	defer func() {
		stop()
		_ = ch.UC.SetReadDeadline(time.Time{})
	}()
	m, files, err := ch.Conn.Recv()
	ctl.CloseFiles(files)
	switch {
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case err != nil:
		return 0, errdefs.Unavailablef("waiting for the command's exit: %w", errors.Join(err, ch.Err()))
	case m.Op != ctl.OpExit || m.ID != id:
		return 0, errdefs.Unavailablef("waiting for command %d's exit: process 1 sent %q for %d", id, m.Op, m.ID)
	case m.Error != "":
		return 0, fmt.Errorf("%w: the command did not start: %s", errdefs.ErrSandbox, m.Error)
	}
	return m.Code, nil
}
