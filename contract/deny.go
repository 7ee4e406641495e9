package contract

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// DenyPattern is a compiled commands.deny rule: whitespace-separated words matched
// against argv one for one. In a word, "*" matches any run of characters (slashes
// included) and "?" any one character. A last word of exactly "*" matches zero or more
// further arguments; otherwise the pattern must cover the whole argv. The first word is
// also tried against the base name of argv[0], so "curl *" catches /usr/bin/curl.
//
// This is the first of two independent layers: it sees only the argv cordon is asked to
// run, not what a shell or script runs later. The sandbox boundary is the second.
type DenyPattern struct {
	Pattern string `json:"pattern"`
	Where   string `json:"where"` // FILE:LINE:COL of the rule
	words   []*regexp.Regexp
	rest    bool // last word was a lone "*"
}

// CompileDenyPattern parses one commands.deny rule.
func CompileDenyPattern(pattern string) (DenyPattern, error) {
	fields := strings.Fields(pattern)
	if len(fields) == 0 {
		return DenyPattern{}, fmt.Errorf("empty command pattern")
	}
	p := DenyPattern{Pattern: pattern}
	if len(fields) > 1 && fields[len(fields)-1] == "*" {
		p.rest = true
		fields = fields[:len(fields)-1]
	}
	for _, f := range fields {
		var b strings.Builder
		b.WriteString("^")
		for _, r := range f {
			switch r {
			case '*':
				b.WriteString(".*")
			case '?':
				b.WriteString(".")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		b.WriteString("$")
		re, err := regexp.Compile(b.String())
		if err != nil {
			return DenyPattern{}, fmt.Errorf("compiling pattern word %q: %w", f, err)
		}
		p.words = append(p.words, re)
	}
	return p, nil
}

// Match reports whether argv is refused by this pattern.
func (p DenyPattern) Match(argv []string) bool {
	if len(p.words) == 0 || len(argv) < len(p.words) {
		return false
	}
	if !p.rest && len(argv) != len(p.words) {
		return false
	}
	if !p.words[0].MatchString(argv[0]) && !p.words[0].MatchString(path.Base(argv[0])) {
		return false
	}
	for i := 1; i < len(p.words); i++ {
		if !p.words[i].MatchString(argv[i]) {
			return false
		}
	}
	return true
}

// DeniedBy returns the first rule of the plan that refuses argv, or nil.
func (p *Plan) DeniedBy(argv []string) *DenyPattern {
	for i := range p.Deny {
		if p.Deny[i].Match(argv) {
			return &p.Deny[i]
		}
	}
	return nil
}
