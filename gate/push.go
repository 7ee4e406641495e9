package gate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// A `git push` gate never runs git in the workspace. What the sandbox wrote there (the
// repository's configuration, hooks, remotes, replace refs, shallow file, submodules,
// links) would decide where the push goes, what the approver is shown and what runs
// on the host. Instead:
//
//   - at request time the push is pinned: cordon reads the refs itself (refs.go), the
//     URL is resolved (from the contract, or from the repository's remote of that name,
//     shown to the approver), every source is resolved to an object id, and the refs
//     are recorded; what the push would publish is computed in a scratch repository
//     against the refs the remote itself lists (pushpreview.go);
//   - on approval cordon refuses if any ref or HEAD moved since, then pushes the pinned
//     object ids from a fresh scratch repository of its own (scratch.go); only https
//     and ssh (and http to a loopback address) are allowed, and redirects are not
//     followed.

// pushFlags are the git push options a gate may name; every other one is refused.
var pushFlags = map[string]bool{
	"-f": true, "--force": true, "--atomic": true, "-q": true, "--quiet": true, "-v": true, "--verbose": true,
	"--no-verify": true, "-n": true, "--dry-run": true, "--porcelain": true, "--progress": true, "--no-progress": true,
}

// push is a pinned `git push`.
type push struct {
	remote  string // as the gate names it
	url     string // where it goes
	http    bool   // a loopback http:// URL
	flags   []string
	refs    []event.GatePushRef
	state   string          // the repository's refs and HEAD when pinned (repoRefs.state)
	format  string          // the repository's object format ("" or "sha256")
	home    string          // cordon's private directory for the push (pinPush), removed by cleanup
	scratch string          // the scratch repository in home the push runs from
	packs   string          // the workspace's packs it reads where they are (packState)
	pol     hostexec.Policy // where the git it runs may not lie (Config.Policy)

	commits []string // what it would publish, one line each (pushpreview.go)
	detail  string   // the files the newest of them change
	history string   // the newest commits of what is pushed
}

// refspec is the refspec git is given for r, one ref of a pinned push.
func refspec(r event.GatePushRef) string {
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
		r := event.GatePushRef{}
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

var remoteName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) })

// resolveURL is where p goes: its remote when that is a URL, else the one pushurl (or
// else the one url) of the remote of that name in the repository's configuration,
// copied to cfg. url.*.insteadOf and the like are not applied: the push runs with no
// repository configuration, and the approver sees the URL it uses.
func (p *push) resolveURL(ctx context.Context, home, cfg string, env []string) error {
	u := p.remote
	if !isURL(u) {
		if !remoteName().MatchString(u) {
			return fmt.Errorf("remote %q is neither a URL nor a remote name", u)
		}
		var err error
		if u, err = remoteURL(ctx, p.pol, home, cfg, env, p.remote); err != nil {
			return err
		}
	}
	http, err := checkURL(u)
	if err != nil {
		return err
	}
	p.url, p.http = u, http
	return nil
}

// remoteURL is the push URL of remote name in the configuration file cfg: exactly one
// pushurl, or else exactly one url.
func remoteURL(ctx context.Context, pol hostexec.Policy, home, cfg string, env []string, name string) (string, error) {
	for _, key := range []string{"pushurl", "url"} {
		out, _ := git(ctx, pol, home, env, "config", "--file", cfg, "--get-all", "remote."+name+"."+key)
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

// pinRef resolves r's source in the refs cordon read to an object id that the
// scratch repository (env) holds, and its destination to a full ref name.
func (p *push) pinRef(ctx context.Context, home string, rr *repoRefs, env []string, r *event.GatePushRef) error {
	full := ""
	if r.Src != "" {
		oid, f, ok := rr.resolve(r.Src)
		if !ok {
			return fmt.Errorf("%s names no ref or object in the repository, or more than one ref", r.Src)
		}
		typ, err := git(ctx, p.pol, home, env, "cat-file", "-t", oid)
		if err != nil {
			return fmt.Errorf("%s names object %s, which the repository does not hold", r.Src, oid)
		}
		if t := strings.TrimSpace(typ); t != "commit" && t != "tag" {
			return fmt.Errorf("%s is a %s; a gate pushes commits and tags", r.Src, t)
		}
		r.OID, full = oid, f
	}
	if !strings.HasPrefix(r.Dst, "refs/") {
		switch {
		case strings.HasPrefix(full, "refs/tags/"):
			r.Dst = "refs/tags/" + r.Dst
		case strings.HasPrefix(full, "refs/heads/"), r.Src == "":
			r.Dst = "refs/heads/" + r.Dst
		default:
			return fmt.Errorf("refspec %s:%s: name the destination in full (refs/heads/…)", r.Src, r.Dst)
		}
	}
	if _, err := git(ctx, p.pol, home, env, "check-ref-format", r.Dst); err != nil {
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
		return false, fmt.Errorf("URL %q does not parse: %w", u, err)
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

// argv is the push cordon runs in the scratch repository.
func (p *push) argv() []string {
	out := append([]string{"git", "push"}, p.flags...)
	out = append(out, "--", p.url)
	for _, r := range p.refs {
		out = append(out, refspec(r))
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
