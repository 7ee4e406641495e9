package testutil

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// GitServer serves the bare repositories under a directory over smart HTTP on
// loopback, with git's own http-backend, as a forge would: fetches are open, pushes
// need HTTP basic authentication (an unauthenticated push gets 401 and a challenge,
// so git asks its credential helper), and it records the passwords pushes carried.
type GitServer struct {
	URL string // http://127.0.0.1:PORT; a repository DIR/NAME.git is URL/NAME.git

	mu        sync.Mutex
	passwords []string
}

// NewGitServer serves root's repositories until the test ends.
func NewGitServer(t testing.TB, root string) *GitServer {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	Require(t, err == nil, "git (scripts/deps.sh installs it)")
	gs := &GitServer{}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		push := strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack"
		if push {
			user, pass, ok := r.BasicAuth()
			if !ok {
				w.Header().Set("WWW-Authenticate", `Basic realm="cordon-test"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
			if r.Method == http.MethodPost { // the push itself, after the ref advertisement
				gs.mu.Lock()
				gs.passwords = append(gs.passwords, pass)
				gs.mu.Unlock()
			}
			r.Header.Del("Authorization")
			// http-backend enables receive-pack for an authenticated user.
			h := *backend
			h.Env = append(append([]string{}, backend.Env...), "REMOTE_USER="+user)
			h.ServeHTTP(w, r)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	gs.URL = srv.URL
	return gs
}

// Passwords are the passwords pushes authenticated with, in order.
func (gs *GitServer) Passwords() []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return append([]string(nil), gs.passwords...)
}
