package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session"
)

// Bounds of a start's git clone.
const (
	cloneTimeout = 10 * time.Minute // each of its commands
	cloneOutput  = 4 << 10          // of each command's output kept for the answer
	maxDenials   = 5                // egress denials named in a failed clone's answer
)

// errClone is a clone that failed or did not land on the pinned commit: the tenant's
// (a URL the egress rules refuse, a commit the repository does not have), answered 422.
var errClone = errors.New("git")

// gitDir is where, inside the sandbox, a start's clone keeps its repository: the
// sandbox's own /tmp, which is the session's alone and goes with it.
const gitDir = "/tmp/cordon-clone.git"

// cloneGit fills the new session's workspace from src, as the session's first
// commands: git runs inside the sandbox, so the clone goes through the session's
// egress proxy and its rules, and each command is in the session's audit log. Only
// the https and http transports are allowed (protocol.allow). The repository is
// cloned bare into the sandbox's /tmp and its tree checked out at src.Commit into the
// workspace, and HEAD is then verified to be that commit. The workspace gets the
// files, not the repository: a sandbox may not make the workspace's own .git (cordon
// protects it, and what it obeys, from every command), and the files a contract
// keeps read-only at the workspace's root (.envrc, .vscode/, …) are refused to the
// checkout as to any command.
func (s *Server) cloneGit(ctx context.Context, roots tenantRoots, rec sessionRecord, src api.GitSource) error {
	sess, err := session.OpenWith(roots.env(), rec.ID)
	if err != nil {
		return err
	}
	git := []string{"git", "-c", "protocol.allow=never", "-c", "protocol.https.allow=always",
		"-c", "protocol.http.allow=always", "-c", "advice.detachedHead=false", "-c", "credential.helper="}
	in := append(append([]string{}, git...), "--git-dir="+gitDir, "--work-tree=.", "-c", "core.bare=false")
	steps := []struct {
		what string
		argv []string
	}{
		{"clone", append(append([]string{}, git...), "clone", "--bare", "--quiet", "--", src.URL, gitDir)},
		{"checkout", append(append([]string{}, in...), "checkout", "--quiet", "--detach", src.Commit)},
		{"rev-parse", append(append([]string{}, in...), "rev-parse", "--verify", "HEAD")},
	}
	for _, st := range steps {
		ctx, cancel := context.WithTimeout(ctx, cloneTimeout+execMargin)
		res, err := sess.Exec(ctx, st.argv, session.ExecOptions{Timeout: cloneTimeout, Cap: cloneOutput})
		cancel()
		if err != nil {
			return fmt.Errorf("git %s: %w", st.what, err)
		}
		if res.ExitCode != 0 {
			err := fmt.Errorf("%w %s exited %d: %s", errClone, st.what, res.ExitCode, strings.TrimSpace(res.Stderr))
			if d := s.denials(roots, rec.ID); d != "" {
				err = fmt.Errorf("%w; %s", err, d)
			}
			return err
		}
		if st.what == "rev-parse" {
			if head := strings.TrimSpace(res.Stdout); head != src.Commit {
				return fmt.Errorf("%w: HEAD is %q, not the pinned commit %s", errClone, head, src.Commit)
			}
		}
	}
	return nil
}

// denials names the egress denials the session's audit log records, as the proxy
// gave them (at most maxDenials): why a clone could not reach its URL.
func (s *Server) denials(roots tenantRoots, id string) string {
	run, err := audit.Open(roots.t.AuditRoot(), id)
	if err != nil {
		return ""
	}
	recs, _ := audit.ReadEvents(run.EventsPath())
	var out []string
	for _, rec := range recs {
		var b event.NetBody
		if rec.Type != event.NetDeny || rec.DecodeBody(&b) != nil {
			continue
		}
		if len(out) == maxDenials {
			out = append(out, "…")
			break
		}
		out = append(out, fmt.Sprintf("%s:%d (%s)", b.Host, b.Port, b.Reason))
	}
	if out == nil {
		return ""
	}
	return "egress denied by the session's contract: " + strings.Join(out, ", ")
}

// fillFromGit clones src into the session rec has just started (cloneGit). On a
// failure it stops the session, removes the workspace when the start made it
// (emptied otherwise) and answers: 422 for a clone that failed (the URL refused by the
// egress rules, a commit the repository does not have), 500 otherwise.
func (s *Server) fillFromGit(w http.ResponseWriter, r *http.Request, roots tenantRoots, rec sessionRecord, src api.GitSource, created bool) bool {
	if _, ok := extendDeadlines(w, 3*(cloneTimeout+execMargin)+stopTimeout); !ok {
		return false
	}
	err := s.cloneGit(context.WithoutCancel(r.Context()), roots, rec, src)
	if err == nil {
		return true
	}
	if serr := s.stop(r.Context(), roots, rec); serr != nil {
		s.log.Error("stopping a session whose clone failed", logTenant, roots.t.Name, "session", rec.ID, "err", serr)
	}
	s.clearWorkspace(roots, roots.workspace(rec.Workspace), created)
	if errors.Is(err, errClone) {
		writeError(w, http.StatusUnprocessableEntity, "session "+rec.ID+" stopped: "+err.Error())
	} else {
		writeError(w, http.StatusInternalServerError, "session "+rec.ID+" stopped: cloning: "+err.Error())
	}
	return false
}
