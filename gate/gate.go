// Package gate is the host side of approval gates: operations a contract names (push a
// branch, publish a package) that the sandbox may ask for, that a person approves or
// denies, and that then run on the host, outside the sandbox, with a credential minted
// for that one operation. It is unstable until v1.
//
// A [Service] holds one run's pending requests. [ServeSandbox] and [ServeAdmin] speak
// the [wire] protocol on the sandbox socket and on the host-only admin socket.
package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/hostexec"
)

// Mode says who decides requests.
type Mode int

// Modes. The zero value is Ask.
const (
	Ask     Mode = iota // a person decides each request
	DenyAll             // every request is refused at once (--gates deny)
)

func (m Mode) String() string {
	switch m {
	case Ask:
		return "ask"
	case DenyAll:
		return "deny"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ModeFromEnv is the mode a cordon started with the environment getenv reads
// decides gates by when no flag says: ask, but deny under CI=true (nobody is there to
// ask); $CORDON_GATES overrides both, and a bad value of it denies (it never loosens).
func ModeFromEnv(getenv func(string) string) Mode {
	m := Ask
	if getenv("CI") == "true" {
		m = DenyAll
	}
	if v := getenv("CORDON_GATES"); v != "" {
		if err := m.Set(v); err != nil {
			m = DenyAll
		}
	}
	return m
}

// Set implements flag.Value.
func (m *Mode) Set(s string) error {
	switch s {
	case "ask":
		*m = Ask
	case "deny":
		*m = DenyAll
	default:
		return fmt.Errorf("want ask or deny, got %q", s)
	}
	return nil
}

// Outcome is how a request ended (the wire type).
type Outcome = wire.Outcome

// Decided is the host's account of one request (the wire type).
type Decided = wire.Decided

// Pending is a request waiting for a person (the wire type).
type Pending = wire.Pending

// Errors returned by a Service.
var (
	// ErrNotFound: no pending request has the id.
	ErrNotFound = wire.ErrNotFound
	// ErrUnknownGate: the contract declares no gate of that name.
	ErrUnknownGate = errors.New("unknown gate")
)

// Decider names used when cordon, not a person, decides.
const byCordon = "cordon"

// MintFunc issues a gate's credential for one operation: env holds NAME=value entries
// for the operation, and revoke is called right after it, on every path.
type MintFunc func(ctx context.Context, c contract.Credential) (env []string, revoke func(context.Context) error, err error)

// Config configures a Service. Zero fields mean defaults.
type Config struct {
	RunID     string // the run (or session) id: {{.Run}} in gates' argv
	Workspace string // host path the operations run in
	Gates     []contract.Gate
	Mode      Mode
	Events    event.Sink // nil: event.Discard
	// Mint issues a gate's credential. nil with a gate that has a credential: requests
	// for it fail closed.
	Mint MintFunc
	Log  *slog.Logger // nil: discard
	// Policy says where the programs the gates run (and git) may not lie:
	// hostexec.PolicyOf the plan. The zero value trusts root only.
	Policy hostexec.Policy
	// Before, when set, is called before each approved operation runs, and an error
	// from it refuses the operation: the runner waits there until the workspace's
	// baseline is read (an operation runs on the host, in the workspace, at the
	// command's request; what it writes must come after the baseline).
	Before func(ctx context.Context) error
	// Decided, when set, is told how each request of a known command (cmd: the one
	// the connection was attributed to) ended, once it has: the host's account, which
	// a client of the command takes rather than what the sandbox prints.
	Decided func(cmd string, d Decided)

	now func() time.Time // nil: time.Now
}

// Service holds one run's gate requests. It is safe for concurrent use by multiple
// goroutines.
type Service struct {
	cfg   Config
	gates map[string]contract.Gate

	mu      sync.Mutex
	pending map[string]*request // guarded by mu
	used    map[string]bool     // every id handed out; guarded by mu
	closed  bool                // guarded by mu
	filed   int                 // requests for a known gate so far; guarded by mu
	over    int64               // of those, refused past MaxRequests, not logged; guarded by mu

	running sync.WaitGroup // approved operations
}

// request is one filed request.
type request struct {
	p    Pending
	gate contract.Gate
	push *push        // a git push, pinned at request time; nil for other operations
	done chan Outcome // buffered 1: the decision's result
}

// New returns a Service for cfg.
func New(cfg Config) *Service {
	if cfg.Events == nil {
		cfg.Events = event.Discard
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.Workspace != "" {
		cfg.Workspace = filepath.Clean(cfg.Workspace)
	}
	s := &Service{cfg: cfg, gates: map[string]contract.Gate{}, pending: map[string]*request{}, used: map[string]bool{}}
	for _, g := range cfg.Gates {
		s.gates[g.Name] = g
	}
	return s
}

// Request files a request for gate name on behalf of command cmd (a command id, or
// "") and blocks until a person approves or denies it, or ctx ends. On approval it
// performs the operation outside the sandbox and returns its outcome. Gates with
// approve: deny, and every gate in Mode DenyAll, are refused at once. When ctx ends
// first the request is withdrawn and ctx's error returned.
func (s *Service) Request(ctx context.Context, name, cmd string) (Outcome, error) {
	return s.request(ctx, name, cmd, nil)
}

// request is Request that calls filed once the request is pending.
func (s *Service) request(ctx context.Context, name, cmd string, filed func(Pending)) (Outcome, error) {
	var id string
	out, err := s.decide(ctx, name, cmd, filed, &id)
	if s.cfg.Decided != nil && cmd != "" {
		d := Decided{Request: id, Gate: name}
		switch {
		case err == nil:
			d.Outcome = &out
		case ctx.Err() != nil:
			d.Error = errWithdrawn
		default:
			d.Error = err.Error()
		}
		s.cfg.Decided(cmd, d)
	}
	return out, err
}

// errWithdrawn is why a request withdrawn before a decision has none.
const errWithdrawn = "withdrawn: the requester went away before a decision"

// decide is request's work; id is set to the request's id once it has one.
func (s *Service) decide(ctx context.Context, name, cmd string, filed func(Pending), id *string) (Outcome, error) {
	g, ok := s.gates[name]
	if !ok {
		return Outcome{}, fmt.Errorf("%w %q (the contract's gates: %s)", ErrUnknownGate, name, s.names())
	}
	if !s.admit() {
		return Outcome{Approved: false, By: byCordon, Why: errOverLimit}, nil
	}
	argv, err := g.Argv(s.cfg.RunID)
	if err != nil {
		return Outcome{}, err
	}
	r := &request{gate: g, done: make(chan Outcome, 1), p: Pending{
		ID: s.newID(), Run: s.cfg.RunID, Gate: name, Why: g.Why, Argv: argv,
		Requested: s.cfg.now().UTC(), Cmd: cmd,
	}}
	*id = r.p.ID
	ev := event.GateRequestBody{ID: r.p.ID, Gate: name, Argv: argv, Approve: g.Approve, Credential: credName(g), Mode: s.cfg.Mode.String()}
	why := s.refusal(g)
	if why == "" {
		why = s.pin(ctx, r, &ev)
		defer r.push.cleanup() // every way out of here: the operation, if any, has ended
	}
	s.emit(event.GateRequest, cmd, ev)
	if why != "" {
		return s.refuse(r, byCordon, why), nil
	}
	r.p.Preview = preview(s.cfg.Workspace, argv, g, r.push)
	if why := s.file(r); why != "" {
		return s.refuse(r, byCordon, why), nil
	}
	s.cfg.Log.Info("gate request filed", logKeyGate, name, logKeyID, r.p.ID)
	if filed != nil {
		filed(r.p)
	}
	select {
	case out := <-r.done:
		return out, nil
	case <-ctx.Done():
	}
	if s.take(r.p.ID) != nil {
		s.emit(event.GateDeny, cmd, event.GateDecisionBody{ID: r.p.ID, Gate: name, By: byCordon, Reason: errWithdrawn})
		return Outcome{}, ctx.Err()
	}
	// Decided at the same moment: the outcome is on its way.
	return <-r.done, nil
}

// pin pins r's operation when it is a git push and records it in ev; it says why the
// request is refused, or "".
func (s *Service) pin(ctx context.Context, r *request, ev *event.GateRequestBody) string {
	p, err := parsePush(r.p.Argv)
	if err == nil && p != nil {
		err = s.pinPush(ctx, p, r.gate)
	}
	if err != nil {
		return "refused: " + err.Error()
	}
	if p != nil {
		r.push = p
		ev.Push = &event.GatePush{URL: p.url, Refs: p.refs, Commits: len(p.commits)}
	}
	return ""
}

// refusal says why g is refused without asking anyone, or "".
func (s *Service) refusal(g contract.Gate) string {
	switch {
	case s.cfg.Mode == DenyAll:
		return "gates are in deny mode (--gates deny): every request is refused"
	case g.Approve == contract.ApproveDeny:
		return "the contract says approve: deny for this gate"
	case g.Credential != nil && s.cfg.Mint == nil:
		return fmt.Sprintf("no provider can mint the gate's credential %s here", g.Credential.Name)
	}
	return ""
}

// refuse logs gate.deny for r and returns the denial.
func (s *Service) refuse(r *request, by, why string) Outcome {
	s.emit(event.GateDeny, r.p.Cmd, event.GateDecisionBody{ID: r.p.ID, Gate: r.p.Gate, By: by, Reason: why})
	s.cfg.Log.Info("gate request denied", logKeyGate, r.p.Gate, logKeyID, r.p.ID, logKeyBy, by, logKeyReason, why)
	return Outcome{Approved: false, By: by, Why: why}
}

// MaxRequests is how many requests of one run are considered and logged. The sandbox
// can ask as fast as it can connect (some 4,000 requests a second, each a gate.request
// and a gate.deny line, 740 bytes, once the pending list is full or for a gate that is
// always refused), each pinning a push with git on the host; a run that needs a person
// to decide needs a handful. Past the limit a request is refused at once, without a
// line of its own, and Close logs how many were (one gate.deny naming no request).
const MaxRequests = 1000

// errOverLimit is why a request past MaxRequests is refused.
var errOverLimit = fmt.Sprintf("too many gate requests in this run (limit %d); later ones are refused without being logged one by one", MaxRequests)

// admit counts a request for a known gate and reports whether it is within
// MaxRequests (or the run has ended, where the usual refusal follows); past the limit
// it is counted as refused.
func (s *Service) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.filed++
	if s.filed <= MaxRequests || s.closed {
		return true
	}
	s.over++
	return false
}

// MaxPending is how many requests of one run may wait at once: a sandbox cannot bury
// the approver's list (or cordon's memory) under requests.
const MaxPending = 16

// file makes r pending, or says why it cannot be.
func (s *Service) file(r *request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return "the run ended"
	case len(s.pending) >= MaxPending:
		return fmt.Sprintf("too many requests waiting (%d); wait for a decision on those", MaxPending)
	}
	s.pending[r.p.ID] = r
	return ""
}

// take removes and returns the pending request id, or nil.
func (s *Service) take(id string) *request {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.pending[id]
	delete(s.pending, id)
	return r
}

// List returns the pending requests, oldest first.
func (s *Service) List() []Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Pending, 0, len(s.pending))
	for _, r := range s.pending {
		out = append(out, r.p)
	}
	sortPending(out)
	return out
}

// Approve approves request id on behalf of by and starts its operation; the requester
// gets the Outcome. It returns ErrNotFound when no request is pending under id.
func (s *Service) Approve(ctx context.Context, id, by string) error {
	s.mu.Lock()
	r := s.pending[id]
	if r != nil {
		delete(s.pending, id)
		s.running.Add(1)
	}
	s.mu.Unlock()
	if r == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	s.emit(event.GateApprove, r.p.Cmd, event.GateDecisionBody{ID: id, Gate: r.p.Gate, By: by})
	s.cfg.Log.Info("gate request approved", logKeyGate, r.p.Gate, logKeyID, id, logKeyBy, by)
	go func() {
		defer s.running.Done()
		out := s.perform(context.WithoutCancel(ctx), r)
		out.Approved, out.By = true, by
		r.done <- out
	}()
	return nil
}

// Deny refuses request id on behalf of by, for the reason why.
func (s *Service) Deny(id, by, why string) error {
	r := s.take(id)
	if r == nil {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if why == "" {
		why = "denied"
	}
	r.done <- s.refuse(r, by, why)
	return nil
}

// Close refuses every pending request ("the run ended"), refuses later ones, and waits
// for running operations. It is idempotent.
func (s *Service) Close() {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	rs := s.pending
	s.pending = map[string]*request{}
	over := s.over
	s.mu.Unlock()
	for _, r := range rs {
		r.done <- s.refuse(r, byCordon, "the run ended")
	}
	if over > 0 && !already {
		s.emit(event.GateDeny, "", event.GateDecisionBody{By: byCordon, Reason: fmt.Sprintf(
			"%d more gate requests refused past the run's limit of %d, not logged one by one", over, MaxRequests)})
	}
	s.running.Wait()
}

func (s *Service) emit(t event.Type, cmd string, body any) {
	s.cfg.Events.Emit(event.Event{Type: t, Time: s.cfg.now(), Cmd: cmd, Body: body})
}

func (s *Service) names() string {
	if len(s.cfg.Gates) == 0 {
		return "none"
	}
	var out string
	for i, g := range s.cfg.Gates {
		if i > 0 {
			out += ", "
		}
		out += g.Name
	}
	return out
}

func credName(g contract.Gate) string {
	if g.Credential == nil {
		return ""
	}
	return g.Credential.Name
}

// newID returns 8 random hex digits, never the same twice in one Service.
func (s *Service) newID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		if id := hex.EncodeToString(b[:]); !s.used[id] {
			s.used[id] = true
			return id
		}
	}
}
