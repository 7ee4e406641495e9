package seatbelt

// An SBPL evaluator for the tests: it parses a generated profile and decides an
// operation the way Seatbelt does, so attacks become assertions on this host.
//
// Where the semantics come from (none of it is Apple documentation; Apple publishes none):
//   - Profile structure, operations and their wildcards (file-read* covers file-read-data,
//     file-read-metadata, ...; default covers every operation), the literal, subpath and
//     regex path filters: Dionysus Blazakis and fG!'s "Apple Sandbox Guide" v1.0
//     (https://reverse.put.as/wp-content/uploads/2011/09/Apple-Sandbox-Guide-v1.0.pdf)
//     and the SBPL primitives list at http://romab.com/ironsuite/SBPL.html.
//   - require-any / require-all / require-not, raw strings #"...", and several filters in
//     one rule meaning any of them: Protonk/sandbox-bootstrap guidance/Appendix.md.
//   - Last matching rule decides ("(allow file-read* (subpath "/etc")) then (deny ...
//     (subpath "/etc/x")): the deny wins"): the SBPL chapter at https://mdview.io/s/22fe803f,
//     and the way OpenAI Codex's seatbelt_base_policy.sbpl and Anthropic's sandbox runtime
//     order their grants and carve-outs.
//   - (remote ip "localhost:PORT") matching a loopback connection to PORT ("localhost" and
//     "*" are the only hosts SBPL accepts there): Codex's seatbelt network policy.
//
// The evaluator is strict: a filter it does not model is an error when a rule holding it
// could decide the operation asked about, never a guess.

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
)

// sexp is a parsed s-expression: an atom (symbol, number, string) or a list.
type sexp struct {
	list   []sexp
	isList bool
	atom   string
	str    bool // atom is a string ("..." or #"...")
	line   int
}

// parseSBPL parses a whole profile into its top-level forms.
func parseSBPL(src string) ([]sexp, error) {
	p := &sexpParser{src: src, line: 1}
	var forms []sexp
	for {
		p.skip()
		if p.i >= len(p.src) {
			return forms, nil
		}
		f, err := p.form()
		if err != nil {
			return nil, err
		}
		forms = append(forms, f)
	}
}

type sexpParser struct {
	src  string
	i    int
	line int
}

// skip passes white space and ; comments.
func (p *sexpParser) skip() {
	for p.i < len(p.src) {
		switch c := p.src[p.i]; {
		case c == '\n':
			p.line++
			p.i++
		case c == ' ' || c == '\t' || c == '\r':
			p.i++
		case c == ';':
			for p.i < len(p.src) && p.src[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func (p *sexpParser) form() (sexp, error) {
	p.skip()
	if p.i >= len(p.src) {
		return sexp{}, fmt.Errorf("line %d: unexpected end of profile", p.line)
	}
	line := p.line
	switch c := p.src[p.i]; {
	case c == '(':
		p.i++
		l := sexp{isList: true, line: line}
		for {
			p.skip()
			if p.i >= len(p.src) {
				return sexp{}, fmt.Errorf("line %d: unclosed list", line)
			}
			if p.src[p.i] == ')' {
				p.i++
				return l, nil
			}
			f, err := p.form()
			if err != nil {
				return sexp{}, err
			}
			l.list = append(l.list, f)
		}
	case c == ')':
		return sexp{}, fmt.Errorf("line %d: unexpected )", line)
	case c == '"':
		return p.str(line)
	case strings.HasPrefix(p.src[p.i:], `#"`):
		end := strings.IndexByte(p.src[p.i+2:], '"')
		if end < 0 {
			return sexp{}, fmt.Errorf("line %d: unclosed raw string", line)
		}
		s := p.src[p.i+2 : p.i+2+end]
		p.i += end + 3
		return sexp{atom: s, str: true, line: line}, nil
	}
	start := p.i
	for p.i < len(p.src) && !strings.ContainsRune(" \t\r\n()\";", rune(p.src[p.i])) {
		p.i++
	}
	return sexp{atom: p.src[start:p.i], line: line}, nil
}

// str reads a "..." string: a backslash escapes the next character.
func (p *sexpParser) str(line int) (sexp, error) {
	var b strings.Builder
	for p.i++; p.i < len(p.src); p.i++ {
		switch c := p.src[p.i]; c {
		case '\\':
			p.i++
			if p.i >= len(p.src) {
				return sexp{}, fmt.Errorf("line %d: unclosed string", line)
			}
			b.WriteByte(p.src[p.i])
		case '"':
			p.i++
			return sexp{atom: b.String(), str: true, line: line}, nil
		case '\n':
			return sexp{}, fmt.Errorf("line %d: newline in a string", line)
		default:
			b.WriteByte(c)
		}
	}
	return sexp{}, fmt.Errorf("line %d: unclosed string", line)
}

// rule is one (allow|deny op... filter...) form.
type rule struct {
	allow   bool
	ops     []string
	filters []sexp
	line    int
}

// policy is a parsed profile: its rules in order.
type policy struct{ rules []rule }

// compilePolicy checks the profile's shape ((version 1), (deny default) first, then
// only allow and deny forms) and collects its rules.
func compilePolicy(src string) (*policy, error) {
	forms, err := parseSBPL(src)
	if err != nil {
		return nil, err
	}
	if len(forms) < 2 || render(forms[0]) != "(version 1)" || render(forms[1]) != "(deny default)" {
		return nil, fmt.Errorf("profile does not start with (version 1) (deny default)")
	}
	p := &policy{}
	for _, f := range forms[1:] {
		if !f.isList || len(f.list) < 2 || (f.list[0].atom != "allow" && f.list[0].atom != "deny") {
			return nil, fmt.Errorf("line %d: not a rule: %s", f.line, render(f))
		}
		r := rule{allow: f.list[0].atom == "allow", line: f.line}
		for _, x := range f.list[1:] {
			if x.isList {
				r.filters = append(r.filters, x)
			} else if len(r.filters) == 0 {
				r.ops = append(r.ops, x.atom)
			} else {
				return nil, fmt.Errorf("line %d: operation after a filter", f.line)
			}
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

func render(s sexp) string {
	if !s.isList {
		if s.str {
			return fmt.Sprintf("%q", s.atom)
		}
		return s.atom
	}
	parts := make([]string, len(s.list))
	for i, x := range s.list {
		parts[i] = render(x)
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// query is one operation a sandboxed process attempts.
type query struct {
	op          string // file-read-data, file-write-create, network-outbound, signal, ...
	path        string // the path as the kernel checks it (links resolved)
	remote      string // host:port of network-outbound
	socket      string // the unix socket path of network-outbound
	sameSandbox bool   // the target of signal or process-info is in this sandbox
}

// decision is what the profile decides for a query and which rule decided it.
type decision struct {
	allow bool
	line  int // of the deciding rule
}

// decide applies SBPL's precedence: the last rule whose operation covers q.op and whose
// filters match decides; (deny default), the first rule, matches everything.
func (p *policy) decide(q query) (decision, error) {
	for i := len(p.rules) - 1; i >= 0; i-- {
		r := p.rules[i]
		if !r.covers(q.op) {
			continue
		}
		ok, err := anyMatch(r.filters, q)
		if err != nil {
			return decision{}, fmt.Errorf("rule at line %d: %w", r.line, err)
		}
		if ok {
			return decision{allow: r.allow, line: r.line}, nil
		}
	}
	return decision{}, fmt.Errorf("no rule decides %s", q.op)
}

// covers reports whether one of r's operations is op or a wildcard over it.
func (r rule) covers(op string) bool {
	for _, o := range r.ops {
		if o == "default" || o == op || strings.HasSuffix(o, "*") && strings.HasPrefix(op, strings.TrimSuffix(o, "*")) {
			return true
		}
	}
	return false
}

// anyMatch: the filters of one rule are alternatives; none at all matches everything.
func anyMatch(fs []sexp, q query) (bool, error) {
	if len(fs) == 0 {
		return true, nil
	}
	for _, f := range fs {
		ok, err := match(f, q)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func match(f sexp, q query) (bool, error) {
	if !f.isList || len(f.list) == 0 {
		return false, fmt.Errorf("bad filter %s", render(f))
	}
	args := f.list[1:]
	arg := func() (string, error) {
		if len(args) != 1 || !args[0].str {
			return "", fmt.Errorf("filter %s wants one string", render(f))
		}
		return args[0].atom, nil
	}
	switch f.list[0].atom {
	case "require-any":
		return anyMatch(args, q)
	case "require-all":
		for _, a := range args {
			if ok, err := match(a, q); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case "require-not":
		if len(args) != 1 {
			return false, fmt.Errorf("require-not wants one filter")
		}
		ok, err := match(args[0], q)
		return !ok && err == nil, err
	case "literal", "path":
		a, err := arg()
		return q.path != "" && q.path == a, err
	case "subpath":
		a, err := arg()
		return q.path != "" && within(q.path, a), err
	case "prefix":
		a, err := arg()
		return q.path != "" && strings.HasPrefix(q.path, a), err
	case "regex":
		a, err := arg()
		if err != nil {
			return false, err
		}
		re, err := regexp.Compile(a)
		if err != nil {
			return false, fmt.Errorf("regex %q: %w", a, err)
		}
		return q.path != "" && re.MatchString(q.path), nil
	case "remote":
		return matchRemote(f, q)
	case "target":
		if len(args) != 1 || args[0].atom != "same-sandbox" {
			return false, fmt.Errorf("unmodelled %s", render(f))
		}
		return q.sameSandbox, nil
	}
	return false, fmt.Errorf("unmodelled filter %s", render(f))
}

// matchRemote: (remote ip "HOST:PORT"), HOST localhost (any loopback address) or *, PORT a
// number or *; (remote unix-socket (path-literal "PATH")), a connection to exactly PATH.
func matchRemote(f sexp, q query) (bool, error) {
	if len(f.list) == 3 && f.list[1].atom == "unix-socket" {
		p := f.list[2]
		if !p.isList || len(p.list) != 2 || p.list[0].atom != "path-literal" || !p.list[1].str {
			return false, fmt.Errorf("unmodelled %s", render(f))
		}
		return q.socket != "" && q.socket == p.list[1].atom, nil
	}
	if len(f.list) != 3 || f.list[1].atom != "ip" || !f.list[2].str {
		return false, fmt.Errorf("unmodelled %s", render(f))
	}
	wantHost, wantPort, err := net.SplitHostPort(f.list[2].atom)
	if err != nil || (wantHost != "localhost" && wantHost != "*") {
		return false, fmt.Errorf("%s: SBPL takes localhost or * as the host", render(f))
	}
	if q.remote == "" {
		return false, nil
	}
	host, port, err := net.SplitHostPort(q.remote)
	if err != nil {
		return false, err
	}
	if wantPort != "*" && wantPort != port {
		return false, nil
	}
	if wantHost == "*" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback(), nil
}

// TestEvaluator pins the evaluator's own semantics on a hand-written profile, so that
// the attack tests rest on something checked.
func TestEvaluator(t *testing.T) {
	p, err := compilePolicy(`(version 1)
(deny default)
(allow file-read* (subpath "/a"))
(deny file-read* (subpath "/a/secret") (regex #"^/a/[sS]ecret2$"))
(allow file-read-data (require-all (prefix "/a/secret/pub") (require-not (literal "/a/secret/pubx"))))
(allow network-outbound (remote ip "localhost:8080"))
(allow signal (target same-sandbox))
(allow network-outbound (remote unix-socket (path-literal "/r/c.sock")))
(allow sysctl-read (sysctl-name "hw.ncpu"))
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    query
		want bool
		line int
	}{
		{query{op: "file-read-data", path: "/a/b"}, true, 3},
		{query{op: "file-read-data", path: "/ab"}, false, 2},
		{query{op: "file-read-metadata", path: "/a"}, true, 3},
		{query{op: "file-read-data", path: "/a/secret/k"}, false, 4},
		{query{op: "file-read-data", path: "/a/Secret2"}, false, 4},
		{query{op: "file-read-data", path: "/a/secret/public"}, true, 5},
		{query{op: "file-read-metadata", path: "/a/secret/public"}, false, 4},
		{query{op: "file-read-data", path: "/a/secret/pubx"}, false, 4},
		{query{op: "file-write-data", path: "/a/b"}, false, 2},
		{query{op: "network-outbound", remote: "127.0.0.1:8080"}, true, 6},
		{query{op: "network-outbound", remote: "[::1]:8080"}, true, 6},
		{query{op: "network-outbound", remote: "127.0.0.1:8081"}, false, 2},
		{query{op: "network-outbound", remote: "1.2.3.4:8080"}, false, 2},
		{query{op: "signal", sameSandbox: true}, true, 7},
		{query{op: "signal"}, false, 2},
		{query{op: "network-outbound", socket: "/r/c.sock"}, true, 8},
		{query{op: "network-outbound", socket: "/r/c.soc"}, false, 2},
		{query{op: "network-outbound", socket: "/r/c.sock/x"}, false, 2},
		{query{op: "file-write-data", path: "/r/c.sock"}, false, 2},
	} {
		d, err := p.decide(c.q)
		if err != nil {
			t.Errorf("%+v: %v", c.q, err)
			continue
		}
		if d.allow != c.want || d.line != c.line {
			t.Errorf("%+v: allow %v by line %d; want %v by line %d", c.q, d.allow, d.line, c.want, c.line)
		}
	}
	if _, err := p.decide(query{op: "sysctl-read"}); err == nil {
		t.Error("an unmodelled filter decided a query; want an error")
	}
}
