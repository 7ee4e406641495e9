package gate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A `git push` gate does not run git in the workspace. What the sandbox wrote there
// (the repository's configuration, hooks, remotes, nested repositories) would decide
// where the push goes and what runs on the host. Instead:
//
//   - at request time the push is pinned: the URL is resolved (from the contract, or
//     from the repository's remote of that name, shown to the approver), every source
//     is resolved to an object id, and the refs are recorded;
//   - on approval cordon refuses if any ref or HEAD moved since, then pushes the pinned
//     object ids from a scratch repository of its own, in a private directory, that
//     borrows the workspace's objects read-only (objects/info/alternates) and has no
//     configuration, hooks or remotes but cordon's; only https and ssh (and http to a
//     loopback address) are allowed, and redirects are not followed.

// pushFlags are the git push options a gate may name; every other one is refused.
var pushFlags = map[string]bool{
	"-f": true, "--force": true, "--atomic": true, "-q": true, "--quiet": true, "-v": true, "--verbose": true,
	"--no-verify": true, "-n": true, "--dry-run": true, "--porcelain": true, "--progress": true, "--no-progress": true,
}

// push is a pinned `git push`.
type push struct {
	remote string // as the gate names it
	url    string // where it goes
	http   bool   // a loopback http:// URL
	flags  []string
	refs   []PushRef
	state  string // the repository's refs and HEAD when pinned

	commits []string // what it would publish, one line each (pushpreview.go)
	detail  string   // the files the newest of them change
}

// PushRef is one refspec of a pinned push, its source pinned to an object id.
type PushRef struct {
	Force bool   `json:"force,omitempty"`
	Src   string `json:"src,omitempty"` // as named; "" deletes Dst
	OID   string `json:"oid,omitempty"`
	Dst   string `json:"dst"`
}

// spec is the refspec git is given.
func (r PushRef) spec() string {
	s := r.OID + ":" + r.Dst
	if r.Force {
		s = "+" + s
	}
	return s
}

// parsePush parses argv when it is a `git push`, or returns nil.
func parsePush(argv []string) (*push, error) {
	if !isGit(argv) || len(argv) < 2 {
		return nil, nil
	}
	if strings.HasPrefix(argv[1], "-") {
		return nil, fmt.Errorf("git options before the subcommand (%s) are refused", argv[1])
	}
	if argv[1] != "push" {
		return nil, nil
	}
	p := &push{}
	var pos []string
	for i, a := range argv[2:] {
		if a == "--" {
			pos = append(pos, argv[2+i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") {
			if !pushFlags[a] {
				return nil, fmt.Errorf("git push %s is refused: a gate pushes exactly the refspecs it names (allowed options: --force, --atomic, --dry-run, --quiet, --verbose, --porcelain)", a)
			}
			p.flags = append(p.flags, a)
			continue
		}
		pos = append(pos, a)
	}
	if len(pos) < 2 {
		return nil, errors.New("git push needs a remote and at least one refspec (what is pushed must be named, not taken from the repository's configuration)")
	}
	p.remote = pos[0]
	for _, s := range pos[1:] {
		r := PushRef{}
		s, r.Force = strings.CutPrefix(s, "+")
		src, dst, ok := strings.Cut(s, ":")
		if !ok {
			dst = src
		}
		if strings.ContainsAny(src+dst, "*^~") || dst == "" {
			return nil, fmt.Errorf("refspec %q is refused: name one source and one destination ref", s)
		}
		r.Src, r.Dst = src, dst
		p.refs = append(p.refs, r)
	}
	return p, nil
}

var remoteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// pin resolves p's URL and sources in the workspace repository and records its refs.
func (p *push) pin(ctx context.Context, ws string, env []string) error {
	u := p.remote
	if !isURL(u) {
		if !remoteName.MatchString(u) {
			return fmt.Errorf("remote %q is neither a URL nor a remote name", u)
		}
		var err error
		if u, err = remoteURL(ctx, ws, env, p.remote); err != nil {
			return err
		}
	}
	http, err := checkURL(u)
	if err != nil {
		return err
	}
	p.url, p.http = u, http
	for i := range p.refs {
		if err := p.pinRef(ctx, ws, env, &p.refs[i]); err != nil {
			return err
		}
	}
	p.state, err = refState(ctx, ws, env)
	return err
}

// remoteURL is the push URL of the repository's remote name: exactly one pushurl, or
// else exactly one url.
func remoteURL(ctx context.Context, ws string, env []string, name string) (string, error) {
	for _, key := range []string{"pushurl", "url"} {
		out, _ := git(ctx, ws, env, "config", "--get-all", "remote."+name+"."+key)
		var urls []string
		for _, l := range strings.Split(out, "\n") {
			if l != "" {
				urls = append(urls, l)
			}
		}
		switch {
		case len(urls) == 1:
			return urls[0], nil
		case len(urls) > 1:
			return "", fmt.Errorf("remote %s has %d %ss; a gate pushes to one URL (name it in the contract)", name, len(urls), key)
		}
	}
	return "", fmt.Errorf("the repository has no remote %q with a URL", name)
}

// pinRef resolves r's source to an object id and its destination to a full ref name.
func (p *push) pinRef(ctx context.Context, ws string, env []string, r *PushRef) error {
	if r.Src != "" {
		oid, err := git(ctx, ws, env, "rev-parse", "--verify", "--quiet", "--end-of-options", r.Src)
		oid = strings.TrimSpace(oid)
		if err != nil || !isOID(oid) {
			return fmt.Errorf("%s names no object in the repository", r.Src)
		}
		typ, _ := git(ctx, ws, env, "cat-file", "-t", oid)
		if t := strings.TrimSpace(typ); t != "commit" && t != "tag" {
			return fmt.Errorf("%s is a %s; a gate pushes commits and tags", r.Src, t)
		}
		r.OID = oid
	}
	if !strings.HasPrefix(r.Dst, "refs/") {
		full := ""
		if r.Src != "" {
			out, _ := git(ctx, ws, env, "rev-parse", "--symbolic-full-name", "--end-of-options", r.Src)
			full = strings.TrimSpace(out)
		}
		switch {
		case strings.HasPrefix(full, "refs/tags/"):
			r.Dst = "refs/tags/" + r.Dst
		case strings.HasPrefix(full, "refs/heads/"), r.Src == "" && r.Dst != "":
			r.Dst = "refs/heads/" + r.Dst
		default:
			return fmt.Errorf("refspec %s:%s: name the destination in full (refs/heads/…)", r.Src, r.Dst)
		}
	}
	if _, err := git(ctx, ws, env, "check-ref-format", r.Dst); err != nil {
		return fmt.Errorf("%q is not a valid ref name", r.Dst)
	}
	return nil
}

func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// refState is the repository's HEAD and every ref with its object id.
func refState(ctx context.Context, ws string, env []string) (string, error) {
	head, _ := git(ctx, ws, env, "symbolic-ref", "-q", "HEAD")
	oid, _ := git(ctx, ws, env, "rev-parse", "--verify", "--quiet", "HEAD")
	refs, err := git(ctx, ws, env, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return "", fmt.Errorf("listing the repository's refs: %w", err)
	}
	return "HEAD " + strings.TrimSpace(head) + " " + strings.TrimSpace(oid) + "\n" + refs, nil
}

// moved says what changed between two refState results, or "".
func moved(before, after string) string {
	if before == after {
		return ""
	}
	old := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		old[l] = true
	}
	for _, l := range strings.Split(after, "\n") {
		if !old[l] {
			return "now " + l
		}
	}
	return "a ref was deleted"
}

// isURL reports whether git would take s for a URL rather than a remote's name.
func isURL(s string) bool {
	return strings.Contains(s, "://") || strings.Contains(s, ":") || strings.Contains(s, "/") || strings.HasPrefix(s, ".")
}

// checkURL refuses every transport but https and ssh (and http to a loopback
// address, which reports true): local paths and file:// run the target repository's
// hooks on the host, ext:: runs a command, git:// and http:// carry the credential in
// the clear.
func checkURL(u string) (loopbackHTTP bool, err error) {
	if strings.Contains(u, "::") {
		return false, fmt.Errorf("URL %q names a transport helper (ext:: and the like run commands); use https or ssh", u)
	}
	if strings.ContainsAny(u, " \t\r\n\x00") || strings.HasPrefix(u, "-") {
		return false, fmt.Errorf("URL %q is refused", u)
	}
	if i := strings.Index(u, "://"); i > 0 {
		return checkSchemeURL(u)
	}
	// scp-like [user@]host:path is ssh when the colon comes before any slash.
	colon, slash := strings.Index(u, ":"), strings.Index(u, "/")
	if colon > 0 && (slash < 0 || colon < slash) {
		host := u[:colon]
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
		if host != "" && !strings.HasPrefix(host, "-") && !strings.HasPrefix(host, "[") {
			return false, nil
		}
	}
	return false, fmt.Errorf("%q is a local path: pushing there would run that repository's hooks on the host; push over https or ssh", u)
}

// checkSchemeURL is checkURL for scheme://… URLs.
func checkSchemeURL(u string) (bool, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return false, fmt.Errorf("URL %q does not parse: %v", u, err)
	}
	switch strings.ToLower(pu.Scheme) {
	case "https", "ssh", "git+ssh", "ssh+git", "http":
	default:
		return false, fmt.Errorf("URL %s: the %s transport is refused (a gate pushes over https or ssh only)", u, pu.Scheme)
	}
	if pu.Host == "" || strings.HasPrefix(pu.Host, "-") {
		return false, fmt.Errorf("URL %q names no host", u)
	}
	if _, has := pu.User.Password(); has {
		return false, fmt.Errorf("URL %s carries a password; the gate's credential provides it", pu.Redacted())
	}
	if strings.EqualFold(pu.Scheme, "http") {
		if !isLoopback(pu.Hostname()) {
			return false, fmt.Errorf("URL %s is plain http, which would send the credential in the clear; use https", u)
		}
		return true, nil
	}
	return false, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// scratchRepo makes a bare repository in home that borrows the workspace's objects,
// after checking that nothing there lends objects of another repository: .git must be
// a directory of the workspace (a pointer can name any repository on the host), with
// no alternates of its own and no link or special file among its objects.
func scratchRepo(ctx context.Context, home, ws string, env []string) (string, error) {
	dotgit := filepath.Join(ws, ".git")
	objects := filepath.Join(dotgit, "objects")
	for _, d := range []string{dotgit, objects} {
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s is not a directory: a gate pushes from the workspace's own git directory (worktree and submodule pointers are refused)", d)
		}
	}
	for _, f := range []string{"info/alternates", "info/http-alternates"} {
		if _, err := os.Lstat(filepath.Join(objects, f)); err == nil {
			return "", fmt.Errorf("refused: %s exists; it would lend another repository's objects to the push", filepath.Join(objects, f))
		}
	}
	err := filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("refused: %s is not a regular file; it could lend another repository's objects to the push", p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	format, _ := git(ctx, ws, env, "rev-parse", "--show-object-format")
	scratch := filepath.Join(home, "push.git")
	args := []string{"init", "-q", "--bare", "--template=", scratch}
	if f := strings.TrimSpace(format); f == "sha256" {
		args = append(args, "--object-format=sha256")
	}
	if _, err := git(ctx, home, env, args...); err != nil {
		return "", fmt.Errorf("making the scratch repository: %w", err)
	}
	info := filepath.Join(scratch, "objects", "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(info, "alternates"), []byte(objects+"\n"), 0o600); err != nil {
		return "", err
	}
	return scratch, nil
}

// argv is the push cordon runs in the scratch repository.
func (p *push) argv() []string {
	out := append([]string{"git", "push"}, p.flags...)
	out = append(out, "--", p.url)
	for _, r := range p.refs {
		out = append(out, r.spec())
	}
	return out
}

// overrides are the command-line settings of the push: the transports allowed, and no
// redirect to a URL nobody approved.
func (p *push) overrides() [][2]string {
	kv := [][2]string{
		{"protocol.allow", "never"},
		{"protocol.https.allow", "always"},
		{"protocol.ssh.allow", "always"},
		{"http.followRedirects", "false"},
	}
	if p.http {
		kv = append(kv, [2]string{"protocol.http.allow", "always"})
	}
	return kv
}
