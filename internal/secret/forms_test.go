package secret_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/secret"
)

const formValue = "cordon_Ab3+/x9Zq-7TUVwx"

// forms returns every form the proxy can make of v, with the text around it chosen by
// the sandbox at every base64 offset, and the variants a destination may echo them in.
func forms(t *testing.T, v string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range secret.Encodings {
		switch e {
		case secret.Raw:
			out["raw"] = "x" + e.Encode(v) + "y"
			out["raw/Bearer"] = "Bearer " + e.Encode(v)
			out["raw/upper"] = strings.ToUpper(v)
			out["raw/lower"] = strings.ToLower(v)
			out["raw/percent"] = url.QueryEscape(v)
			out["raw/percent-all-lower"] = percentAll(v, false)
			out["raw/percent-all-upper"] = percentAll(v, true)
			out["raw/percent-twice"] = url.QueryEscape(url.QueryEscape(v))
			out["raw/hex"] = hex.EncodeToString([]byte(v))
			out["raw/HEX"] = strings.ToUpper(hex.EncodeToString([]byte(v)))
		case secret.Base64:
			for _, user := range []string{"", "u:", "us:", "use:", "user:"} {
				enc := e.Encode(user + v + ":tail")
				out["base64/"+user] = "Basic " + enc
				out["base64/"+user+"/unpadded"] = strings.TrimRight(enc, "=")
				out["base64/"+user+"/url"] = base64.URLEncoding.EncodeToString([]byte(user + v))
				out["base64/"+user+"/lower"] = strings.ToLower(enc)
				out["base64/"+user+"/percent"] = url.QueryEscape(enc)
				out["base64/"+user+"/embedded"] = base64.StdEncoding.EncodeToString([]byte("long prefix " + user + v + " and suffix"))
			}
		default:
			t.Fatalf("encoding %v has no forms in this test", e)
		}
	}
	return out
}

// percentAll percent-encodes every byte of s, with hex digits in the case asked.
func percentAll(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		h := hex.EncodeToString([]byte{s[i]})
		if upper {
			h = strings.ToUpper(h)
		}
		b.WriteString("%" + h)
	}
	return b.String()
}

func TestMatcherFindsEveryForm(t *testing.T) {
	m := secret.NewMatcher(secret.Named{Name: "API", Value: formValue})
	for name, s := range forms(t, formValue) {
		t.Run(name, func(t *testing.T) {
			if got, ok := m.Find(s); !ok || got != "API" {
				t.Errorf("Find(%q) = %q, %v; want API", s, got, ok)
			}
			r := m.Replace(s, func(n string) string { return "[" + n + "]" })
			if _, ok := m.Find(r); ok || !strings.Contains(r, "[API]") {
				t.Errorf("Replace(%q) = %q: the value is still there or was not marked", s, r)
			}
		})
	}
}

func TestMatcherLeavesOtherText(t *testing.T) {
	m := secret.NewMatcher(secret.Named{Name: "API", Value: formValue})
	for _, s := range []string{"", "Bearer cordon_placeholder", "Basic dXNlcjpwYXNz", "%zz%", strings.Repeat("a", 1000)} {
		if n, ok := m.Find(s); ok {
			t.Errorf("Find(%q) = %q", s, n)
		}
		if r := m.Replace(s, func(string) string { return "X" }); r != s {
			t.Errorf("Replace(%q) = %q", s, r)
		}
	}
	if !secret.NewMatcher().Empty() || !secret.NewMatcher(secret.Named{Name: "E"}).Empty() {
		t.Error("a matcher of no values is not empty")
	}
}

// TestMatcherTakesEdges: the base64 characters at the edges of a value carry some of its
// bits; redaction takes them too.
func TestMatcherTakesEdges(t *testing.T) {
	m := secret.NewMatcher(secret.Named{Name: "API", Value: formValue})
	enc := base64.StdEncoding.EncodeToString([]byte("u:" + formValue + "!"))
	got := m.Replace("Basic "+enc, func(string) string { return "#" })
	// "u:" is 2 bytes: 2 characters encode only it; the value starts inside the third.
	if want := "Basic " + enc[:2] + "#"; !strings.HasPrefix(got, want) {
		t.Errorf("Replace = %q; want it to start %q", got, want)
	}
}

// TestMatcherFindsPieces: a value cut in parts shows pieces of it; FindPiece finds each
// piece of PieceLen characters, of every form, and no shorter one.
func TestMatcherFindsPieces(t *testing.T) {
	m := secret.NewMatcher(secret.Named{Name: "API", Value: formValue})
	b64 := base64.StdEncoding.EncodeToString([]byte("ab:" + formValue))
	for name, s := range map[string]string{
		"first half":   "X-A: " + formValue[:secret.PieceLen] + "\n",
		"second half":  "X-B: " + strings.ToUpper(formValue[len(formValue)-secret.PieceLen:]),
		"base64 piece": b64[8 : 8+secret.PieceLen],
		"percent":      url.QueryEscape(formValue[3 : 3+secret.PieceLen]),
	} {
		if _, ok := m.FindPiece(s); !ok {
			t.Errorf("%s: FindPiece(%q) found nothing", name, s)
		}
		if _, ok := m.Find(s); ok {
			t.Errorf("%s: Find(%q) found a piece (only FindPiece should)", name, s)
		}
	}
	if n, ok := m.FindPiece(formValue[:secret.PieceLen-1] + " " + formValue[secret.PieceLen-1:]); ok {
		t.Errorf("FindPiece found %s in pieces shorter than PieceLen", n)
	}
}
