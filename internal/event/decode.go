package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// SchemaVersion is the version of the audit log's schema: the envelope of a line and
// the bodies of this package. The audit writer records it in the "v" field of every
// line. Within a version bodies may gain fields (readers ignore fields they do not
// know); removing or renaming a field makes a new version.
const SchemaVersion = 1

// ErrUnknownType is returned by [DecodeBody] for an event type this schema does not
// define.
var ErrUnknownType = errors.New("unknown event type")

// bodies holds the zero body of every event type: the one table of which struct
// carries which type.
var bodies = map[Type]any{
	RunStart:          RunStartBody{},
	CmdStart:          CmdStartBody{},
	CmdEnd:            CmdEndBody{},
	FSDiff:            FSDiffBody{},
	NetAllow:          NetBody{},
	NetDeny:           NetBody{},
	NetDenySummary:    NetDenySummaryBody{},
	NetAllowSummary:   NetAllowSummaryBody{},
	CredIssue:         CredIssueBody{},
	CredRevoke:        CredRevokeBody{},
	SyscallAlert:      SyscallAlertBody{},
	GateRequest:       GateRequestBody{},
	GateApprove:       GateDecisionBody{},
	GateDeny:          GateDecisionBody{},
	GateExec:          GateExecBody{},
	RunEnd:            RunEndBody{},
	SessionCheckpoint: CheckpointBody{},
	SessionRollback:   RollbackBody{},
	StageApply:        StageBody{},
	StageDiscard:      StageBody{},
}

// DecodeBody decodes the JSON body of an event of type t into the body struct of
// that type, which it returns as a value (a [NetBody] for net.allow, …). Fields the
// struct does not know are ignored, as the schema's versioning allows.
func DecodeBody(t Type, raw []byte) (any, error) {
	zero, ok := bodies[t]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownType, t)
	}
	p := reflect.New(reflect.TypeOf(zero))
	if err := json.Unmarshal(raw, p.Interface()); err != nil {
		return nil, fmt.Errorf("decoding %s body: %w", t, err)
	}
	return p.Elem().Interface(), nil
}
