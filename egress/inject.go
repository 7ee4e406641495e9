package egress

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cordonhq/cordon/internal/secret"
)

// Injection and scrubbing. The proxy writes a credential's value into a request only
// through [secret.Encoding.Encode], in the encodings [secret.Encodings] lists, and a
// response head is relayed only once no form of any value is left in it (see
// [Proxy.scrubResponse]): the forms it looks for are derived from the same list.

// ErrCredentialInResponse: a destination's response head carried a form of a credential
// the proxy could not put back as the placeholder the sandbox sent; it was refused.
var ErrCredentialInResponse = errors.New("response carried a credential")

// forms returns the matcher of every form of the credentials' values, and the
// (value, placeholder) pairs that undo the raw form.
func (ic *Intercept) forms() (*secret.Matcher, []string) {
	if ic == nil {
		return nil, nil
	}
	var named []secret.Named
	var back []string
	for _, c := range ic.Credentials {
		named = append(named, secret.Named{Name: c.Name, Value: c.Value.Reveal()})
		back = append(back, secret.Raw.Encode(c.Value.Reveal()), c.Placeholder)
	}
	return secret.NewMatcher(named...), back
}

// inject puts the credentials into the outgoing headers: every header value has each
// credential's placeholder replaced by its value, in clear or inside Basic authorization;
// an Authorization header that carried no placeholder is dropped, and when none is left,
// the first credential is sent as "Authorization: Bearer <value>". Proxy-Authorization
// never reaches here (hop-by-hop headers are stripped before).
//
// It returns the (sent, received) pairs of what it encoded other than raw, for
// [Proxy.scrubResponse] to put back what the client sent where a destination echoes it.
func inject(h http.Header, creds []Credential) []string {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = replaceAll(v, creds)
		}
		h[k] = vs
	}
	var keep, back []string
	for _, v := range h.Values("Authorization") {
		if nv, sent, recv, ok := injectBasic(v, creds); ok {
			keep = append(keep, nv)
			back = append(back, sent, recv)
			continue
		}
		for _, c := range creds {
			if strings.Contains(v, c.Value.Reveal()) {
				keep = append(keep, v)
				break
			}
		}
	}
	h.Del("Authorization")
	if len(keep) == 0 && len(creds) > 0 {
		keep = []string{"Bearer " + secret.Raw.Encode(creds[0].Value.Reveal())}
	}
	if len(keep) > 0 {
		h["Authorization"] = keep[:1]
	}
	return back
}

func replaceAll(v string, creds []Credential) string {
	for _, c := range creds {
		v = strings.ReplaceAll(v, c.Placeholder, secret.Raw.Encode(c.Value.Reveal()))
	}
	return v
}

// injectBasic replaces a placeholder inside "Basic base64(user:password)", and returns
// the base64 it sent and the base64 it received.
func injectBasic(v string, creds []Credential) (out, sent, recv string, ok bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", "", "", false
	}
	recv = strings.TrimSpace(rest)
	raw, err := secret.Base64.Decode(recv)
	if err != nil {
		return "", "", "", false
	}
	s := replaceAll(raw, creds)
	if s == raw {
		return "", "", "", false
	}
	sent = secret.Base64.Encode(s)
	return "Basic " + sent, sent, recv, true
}

// scrubResponse makes a response head safe to relay to the sandbox. It puts back what
// the proxy substituted, wherever a destination echoed it: each credential's value (as
// sent, byte for byte) becomes its placeholder, and each value injected in an encoding
// (back: the (sent, received) pairs [inject] returned) what the client sent. Then no
// form of any credential may be left in the status line, a header name or a header
// value, in any letter case or percent-encoded, nor any piece of one of
// [secret.PieceLen] characters (a value split across headers or truncated); where one
// is, the response is refused with [ErrCredentialInResponse]. Trailers are never relayed: they are dropped here.
func (p *Proxy) scrubResponse(resp *http.Response, back []string) error {
	resp.Trailer = nil
	if p.forms.Empty() {
		return nil
	}
	rep := strings.NewReplacer(append(back, p.back...)...)
	resp.Status = rep.Replace(resp.Status)
	h := make(http.Header, len(resp.Header))
	for k, vs := range resp.Header {
		nk := rep.Replace(k)
		for _, v := range vs {
			h[nk] = append(h[nk], rep.Replace(v))
		}
	}
	resp.Header = h
	where := ""
	name, found := p.forms.FindPiece(resp.Status)
	if found {
		where = "the status line"
	}
	for k, vs := range h {
		if found {
			break
		}
		if name, found = p.forms.FindPiece(k); found {
			where = "a header name"
			break
		}
		for _, v := range vs {
			if name, found = p.forms.FindPiece(v); found {
				where = "a header value"
				break
			}
		}
	}
	if found {
		return fmt.Errorf("%w: credential %s in %s", ErrCredentialInResponse, name, where)
	}
	return nil
}

// scrubText replaces every form of a credential in s (text the proxy writes to the
// sandbox that may quote a destination) with the credential's name.
func (p *Proxy) scrubText(s string) string {
	return p.forms.Replace(s, func(name string) string { return "[REDACTED:" + name + "]" })
}
