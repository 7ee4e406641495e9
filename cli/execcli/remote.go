package execcli

import (
	"context"
	"os"

	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// Remote is the server `cordon --host` names, and how to authenticate to it: the
// flags, else the environment ([Remote.WithEnv]). Host "" is this host: no server.
type Remote struct {
	Host      string // https://HOST:PORT or unix:///PATH
	TokenFile string // else $CORDON_TOKEN
	TLSCA     string // CA certificates (PEM) the server's certificate is verified against
	TLSCert   string // a client certificate (PEM) and its key
	TLSKey    string
}

// The usage of the flags that name a server, which cordon's persistent flags and
// exec's (which cobra hands over unparsed) share.
const (
	HostUsage      = "drive the cordon serve daemon at `URL` (https://HOST:PORT or unix:///PATH) instead of this host ($CORDON_HOST)"
	TokenFileUsage = "with --host: read the bearer token from `FILE`, which must be yours and readable by no one else (default $CORDON_TOKEN)"
	TLSCAUsage     = "with --host: verify the server's certificate against the CA certificates in `FILE` ($CORDON_TLS_CA)"
	TLSCertUsage   = "with --host: present the client certificate in `FILE` (with --tls-key)"
	TLSKeyUsage    = "with --host: the client certificate's key `FILE`"
)

// WithEnv is r with what its flags left unset taken from $CORDON_HOST and
// $CORDON_TLS_CA.
func (r Remote) WithEnv() Remote {
	if r.Host == "" {
		r.Host = os.Getenv("CORDON_HOST")
	}
	if r.TLSCA == "" {
		r.TLSCA = os.Getenv("CORDON_TLS_CA")
	}
	return r
}

// Session is what exec needs of a session: a *session.Session of this host, or one
// of a server's (session/remote), which [IO.OpenRemote] opens.
type Session interface {
	Exec(ctx context.Context, argv []string, o session.ExecOptions) (*wire.Result, error)
}
