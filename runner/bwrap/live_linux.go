package bwrap

import (
	"errors"
	"os"
	"os/exec"

	"github.com/cordonhq/cordon/internal/handoff"
	"github.com/cordonhq/cordon/internal/linux"
)

// startHandedOver starts cmd from the hand-off's mount namespace. A session's process 1
// (serve) keeps the staged workspace's overlay for cordon (StagedWorkspace).
func (s *instance) startHandedOver(sp *handoff.Spec, cmd *exec.Cmd, serve bool) (func(), error) {
	if !serve {
		return handoff.Start(sp, cmd)
	}
	return handoff.StartLive(sp, cmd, func(live *os.File) {
		s.liveMu.Lock()
		defer s.liveMu.Unlock()
		if s.live != nil {
			s.live.Close()
		}
		s.live = live
	})
}

// StagedWorkspace implements sandbox.Sandbox.StagedWorkspace: a duplicate of the staged
// session's overlay, the workspace its sandbox sees and writes.
func (s *instance) StagedWorkspace() (*os.File, error) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live == nil {
		return nil, errors.New("bwrap: no staged workspace is mounted")
	}
	return linux.DupFile(s.live)
}

func (s *instance) dropLive() {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live != nil {
		s.live.Close()
		s.live = nil
	}
}
