package bwrap

import (
	"errors"
	"os"
	"os/exec"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/stage"
)

// startStaged starts cmd from the stage's mount namespace. A session's process 1
// (serve) keeps the staged workspace's overlay for cordon (StagedWorkspace).
func (s *instance) startStaged(sp *stage.Spec, cmd *exec.Cmd, serve bool) (func(), error) {
	if !serve {
		return stage.Start(sp, cmd)
	}
	return stage.StartLive(sp, cmd, func(live *os.File) {
		s.liveMu.Lock()
		defer s.liveMu.Unlock()
		if s.live != nil {
			s.live.Close()
		}
		s.live = live
	})
}

// StagedWorkspace implements sandbox.StagedWorkspace: a duplicate of the staged
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
