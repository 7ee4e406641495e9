// Package command is the exec credential provider: it mints and revokes credentials
// by running commands the contract names, which is how teams plug in the vault, gh or
// aws sts command-line tools, or a script of their own. The commands run on the host,
// outside the sandbox, with an environment built from nothing.
//
// Scope (in the contract):
//
//	scope:
//	  mint: [/usr/local/bin/mint-ci-token, --role, ci]   # required
//	  revoke: [/usr/local/bin/revoke-ci-token]            # required ([true] if only the ttl ends it)
//	  env: [VAULT_ADDR, VAULT_TOKEN]                     # host variables the commands get
//	  params: {role: ci-readonly}                        # free-form strings, for the commands
//
// Each command's first word is an absolute path or a name looked up in the host's
// PATH; a relative path is refused (it would run whatever the workspace holds). The
// program, its #! interpreters and the directories above them must be code the
// sandbox can never have written: internal/hostexec checks them each time a command
// runs, and runs the file it checked, through its descriptor, in /. Both get PATH
// (the host's, without relative entries and entries in the workspace or a path the
// sandbox may write), CORDON_RUN_ID, CORDON_CRED_NAME, CORDON_CRED_TTL (seconds) and
// CORDON_CRED_SCOPE (the scope as JSON), plus the host variables scope.env names and
// nothing else. mint prints one JSON object on stdout:
//
//	{"token": "…", "id": "…", "expires_at": "2030-01-02T15:04:05Z"}
//
// where id (required, not a credential: it appears in the audit log) is what revoke
// needs, and gets as CORDON_CRED_ID, with CORDON_CRED_EXPIRES_AT. revoke exits 0 when
// the credential is revoked or already gone. Commands are killed after a timeout.
package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/internal/scope"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// Config configures the provider. Zero fields mean defaults.
type Config struct {
	// Getenv reads the host environment, for PATH and the variables scope.env names;
	// nil means os.Getenv.
	Getenv func(string) string
	// Stderr receives the commands' standard error (the operator's terminal, never
	// the audit log: a careless script may print a token there); nil discards it.
	Stderr io.Writer
	// Timeout limits each command; 0 means 30s.
	Timeout time.Duration
	// Policy says where the commands' programs may not lie (hostexec.PolicyOf the
	// plan). The zero value trusts root and the invoking user and no path less than
	// another (gc, which has no plan): programs others can write are still refused.
	Policy hostexec.Policy
}

// Provider runs mint and revoke commands. It implements [creds.Provider] and is safe
// for concurrent use.
type Provider struct {
	cfg Config
}

// New returns a provider.
func New(cfg Config) *Provider {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Policy.Invoker == 0 && len(cfg.Policy.Untrusted) == 0 {
		cfg.Policy.Invoker = -1
	}
	return &Provider{cfg: cfg}
}

// maxOutput bounds what mint may print.
const maxOutput = 64 << 10

// spec is a parsed scope.
type spec struct {
	mint, revoke []string
	env          []string
	json         string // the whole scope as JSON, for CORDON_CRED_SCOPE
}

func parse(name string, sc map[string]any) (spec, error) {
	r := scope.New("credentials "+name+": scope", sc)
	s := spec{mint: r.Strings("mint", true), revoke: r.Strings("revoke", true), env: r.Strings("env", false)}
	r.StringMap("params", false)
	errs := []error{r.Err()}
	for _, argv := range [][]string{s.mint, s.revoke} {
		if len(argv) > 0 && strings.Contains(argv[0], "/") && !strings.HasPrefix(argv[0], "/") {
			errs = append(errs, errdefs.Invalidf("credentials %s: scope: %q: a command is an absolute path or a name in PATH, never relative (the workspace is the agent's)", name, argv[0]))
		}
	}
	for _, v := range s.env {
		if v == "" || strings.ContainsAny(v, "= \x00") || strings.HasPrefix(v, "CORDON_") || v == "PATH" || loaderVar(v) {
			errs = append(errs, errdefs.Invalidf("credentials %s: scope.env: %q is not a variable the commands can be given", name, v))
		}
	}
	data, err := json.Marshal(sc)
	if err != nil {
		errs = append(errs, errdefs.Invalidf("credentials %s: scope: %w", name, err))
	}
	s.json = string(data)
	return s, errors.Join(errs...)
}

// loaderVar reports whether v steers what a program loads rather than what it does
// (the dynamic loader's variables and a shell's startup file): the commands' code is
// the checked program, nothing a variable names.
func loaderVar(v string) bool {
	return strings.HasPrefix(v, "LD_") || v == "BASH_ENV" || v == "ENV" || v == "GCONV_PATH"
}

// environ builds a command's environment from nothing.
func (p *Provider) environ(s spec, run string, c contract.Credential, extra ...string) []string {
	env := []string{
		"PATH=" + HostPath(p.cfg.Getenv("PATH"), p.cfg.Policy),
		"CORDON_RUN_ID=" + run,
		"CORDON_CRED_NAME=" + c.Name,
		"CORDON_CRED_TTL=" + strconv.FormatInt(int64(c.TTL/time.Second), 10),
		"CORDON_CRED_SCOPE=" + s.json,
	}
	for _, name := range s.env {
		if v := p.cfg.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return append(env, extra...)
}

// minted is mint's output.
type minted struct {
	Token     string `json:"token"`
	ID        string `json:"id"`
	ExpiresAt string `json:"expires_at"`
}

// Issue implements creds.Provider by running the mint command.
func (p *Provider) Issue(ctx context.Context, args creds.IssueArgs) (creds.Grant, error) {
	c := args.Credential
	s, err := parse(c.Name, c.Scope)
	if err != nil {
		return creds.Grant{}, err
	}
	out, err := p.run(ctx, s.mint, p.environ(s, args.Run, c))
	if err != nil {
		return creds.Grant{}, fmt.Errorf("mint command: %w", err)
	}
	var m minted
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		// Not the error text: it could quote the output, and the output a token.
		return creds.Grant{}, errors.New(`mint command: stdout is not one JSON object {"token", "id", "expires_at"}`)
	}
	if m.ID == "" {
		return creds.Grant{}, errors.New("mint command: printed no id, so nothing could revoke what it minted")
	}
	g := creds.Grant{Secret: creds.NewSecret(m.Token), ID: m.ID, RevokeRef: m.ID}
	g.ExpiresAt, err = time.Parse(time.RFC3339, m.ExpiresAt)
	switch {
	case err != nil:
		err = fmt.Errorf("mint command: expires_at %q is not an RFC 3339 time", m.ExpiresAt)
	case m.Token == "":
		err = errors.New("mint command: printed an empty token")
	}
	if err != nil {
		g.Run, g.Name, g.Scope = args.Run, c.Name, c.Scope
		if rerr := p.Revoke(context.WithoutCancel(ctx), g); rerr != nil {
			err = errors.Join(err, fmt.Errorf("revoking what it minted: %w", rerr))
		}
		return creds.Grant{}, err
	}
	return g, nil
}

// Revoke implements creds.Provider by running the revoke command with the id mint
// printed.
func (p *Provider) Revoke(ctx context.Context, g creds.Grant) error {
	if g.RevokeRef == "" {
		return creds.ErrNoRevokeRef
	}
	s, err := parse(g.Name, g.Scope)
	if err != nil {
		return err
	}
	ttl := g.ExpiresAt.Sub(g.IssuedAt).Round(time.Second)
	env := p.environ(s, g.Run, contract.Credential{Name: g.Name, TTL: ttl},
		"CORDON_CRED_ID="+g.RevokeRef,
		"CORDON_CRED_EXPIRES_AT="+g.ExpiresAt.UTC().Format(time.RFC3339))
	if _, err := p.run(ctx, s.revoke, env); err != nil {
		return fmt.Errorf("revoke command: %w", err)
	}
	return nil
}

// run runs argv with env and returns its stdout.
func (p *Provider) run(ctx context.Context, argv, env []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	prog, err := hostexec.Resolve(argv[0], pathOf(env), p.cfg.Policy)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	cmd := prog.Command(ctx, argv[1:], env)
	cmd.Env = env
	cmd.Stdin = nil
	var out limitedBuffer
	cmd.Stdout = &out
	cmd.Stderr = p.cfg.Stderr
	cmd.WaitDelay = 2 * time.Second
	killGroup(cmd)
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", argv[0], ctx.Err())
	case err != nil:
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	case out.over:
		return nil, fmt.Errorf("%s: printed more than %d bytes", argv[0], maxOutput)
	}
	return out.buf.Bytes(), nil
}

// pathOf is the PATH of env.
func pathOf(env []string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			return v
		}
	}
	return ""
}

// limitedBuffer keeps the first maxOutput bytes written to it. (Not an embedded
// bytes.Buffer: io.Copy would use its ReadFrom and bypass the limit.)
type limitedBuffer struct {
	buf  bytes.Buffer
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// Commands returns the mint and revoke argv a credential's scope names (nil for one
// the scope lacks or spells wrong; the compiler reports those).
func Commands(c contract.Credential) (mint, revoke []string) {
	s, _ := parse(c.Name, c.Scope)
	return s.mint, s.revoke
}

// HostPath is the PATH the commands get, for a host whose PATH is path.
func HostPath(path string, pol hostexec.Policy) string {
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return pol.SafePath(path)
}
