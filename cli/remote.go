package cli

import (
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/cli/execcli"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/remote"
	"github.com/cordonhq/cordon/session/wire"
)

// `cordon --host URL` drives a cordon serve daemon (docs/serve.md, "Using it from the
// CLI") with the commands a server serves; every other command that acts on this host
// refuses to run with a host set, rather than run here.

// remoteCommands are the commands that drive a server with --host.
var remoteCommands = map[string]bool{
	"cordon session start": true, "cordon session ls": true, "cordon session stop": true, "cordon session sweep": true,
	"cordon session checkpoint": true, "cordon session rollback": true, "cordon exec": true,
	"cordon gate ls": true, "cordon gate show": true, "cordon gate approve": true, "cordon gate deny": true,
	"cordon audit ls": true, "cordon audit show": true, "cordon audit verify": true, "cordon audit export": true,
	"cordon audit follow": true, "cordon audit prune": true, "cordon audit report": true,
	"cordon workspace": true, "cordon workspace ls": true, "cordon workspace push": true, "cordon workspace pull": true, "cordon workspace rm": true, "cordon apply": true, "cordon discard": true,
}

// hostNeutral are the commands that neither act on this host's sessions, runs and
// logs nor on a server's: they run the same with a host set.
var hostNeutral = map[string]bool{
	"cordon": true, "cordon version": true, "cordon help": true, "cordon completion": true, "cordon check": true,
	"cordon explain": true, "cordon diff": true, "cordon session": true, "cordon audit": true,
}

// hostFlags adds the persistent flags that name a server to root.
func hostFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.String("host", os.Getenv("CORDON_HOST"), execcli.HostUsage)
	f.String("token-file", "", execcli.TokenFileUsage)
	f.String("tls-ca", os.Getenv("CORDON_TLS_CA"), execcli.TLSCAUsage)
	f.String("tls-cert", "", execcli.TLSCertUsage)
	f.String("tls-key", "", execcli.TLSKeyUsage)
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return checkHost(c) }
}

// checkHost refuses a command that cannot drive a server when a host is set, and the
// server's companion flags without a host.
func checkHost(c *cobra.Command) error {
	path := c.CommandPath()
	if strings.HasPrefix(path, "cordon internal") || strings.HasPrefix(path, "cordon __complete") || path == "cordon exec" {
		return nil // re-executed helpers; exec parses its own
	}
	r := hostOf(c)
	if r.Host == "" {
		for _, name := range []string{"token-file", "tls-ca", "tls-cert", "tls-key"} {
			if c.Flags().Changed(name) {
				return errdefs.Usagef("--%s needs --host (or $CORDON_HOST)", name)
			}
		}
		return nil
	}
	if !remoteCommands[path] && !hostNeutral[path] {
		return errdefs.Usagef("%s works on this host only, and --host (or $CORDON_HOST) names a server (%s): unset it to run here; with --host: %s",
			strings.TrimPrefix(path, "cordon "), r.Host, remoteList())
	}
	return nil
}

func remoteList() string {
	return "cordon session start|ls|stop|sweep|checkpoint|rollback, cordon exec, cordon gate ls|show|approve|deny, " +
		"cordon audit ls|show|verify|export|follow|prune|report, cordon workspace ls|push|pull|rm, cordon apply, cordon discard"
}

// hostOf is the server c's flags name (with the environment's defaults).
func hostOf(c *cobra.Command) execcli.Remote {
	get := func(name string) string {
		if f := c.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return execcli.Remote{Host: get("host"), TokenFile: get("token-file"), TLSCA: get("tls-ca"), TLSCert: get("tls-cert"), TLSKey: get("tls-key")}.WithEnv()
}

// dial makes a client of the server r names: the token from --token-file, else
// $CORDON_TOKEN; a client certificate when given.
func dial(r execcli.Remote) (*remote.Client, error) {
	var opts []remote.Option
	switch tok := os.Getenv("CORDON_TOKEN"); {
	case r.TokenFile != "":
		opts = append(opts, remote.TokenFile(r.TokenFile))
	case tok != "":
		opts = append(opts, remote.Token(tok))
	}
	if r.TLSCA != "" {
		opts = append(opts, remote.CA(r.TLSCA))
	}
	if r.TLSCert != "" || r.TLSKey != "" {
		opts = append(opts, remote.ClientCert(r.TLSCert, r.TLSKey))
	}
	c, err := remote.Dial(r.Host, opts...)
	if err != nil {
		return nil, errdefs.Usagef("%w", err)
	}
	return c, nil
}

// openRemote is execcli's IO.OpenRemote: a handle on session id of the server r
// names; the exec itself says whether it exists.
func openRemote(_ context.Context, r execcli.Remote, id string) (execcli.Session, error) {
	c, err := dial(r)
	if err != nil {
		return nil, err
	}
	s, err := c.Handle(id)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// sessionOps is what the session commands do to a session: a *session.Session of
// this host, or a *remote.Session of a server.
type sessionOps interface {
	Sweep(ctx context.Context) (session.Turn, error)
	Stop(ctx context.Context) error
	Checkpoint(ctx context.Context, name string) (wire.Checkpoint, []string, error)
	Rollback(ctx context.Context, to string) (wire.Checkpoint, []string, []string, error)
}

// openSession opens session id: of the server c's --host names, else of this host.
func openSession(c *cobra.Command, id string) (sessionOps, error) {
	if r := hostOf(c); r.Host != "" {
		cl, err := dial(r)
		if err != nil {
			return nil, err
		}
		s, err := cl.Handle(id)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := session.Open(id)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Both kinds of session are driven through the same two interfaces.
var (
	_ sessionOps      = (*session.Session)(nil)
	_ sessionOps      = (*remote.Session)(nil)
	_ execcli.Session = (*session.Session)(nil)
	_ execcli.Session = (*remote.Session)(nil)
)
