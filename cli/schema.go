package cli

import (
	"encoding/json"
	"io"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/gate"
)

// The schemas of the --json documents (docs/cli.md): every document is one JSON object
// whose first field, "schema", is "cordon.COMMAND/vN", COMMAND the command's words
// joined by dots. Fields are only added within a version; a field's meaning changes,
// or a field goes, only with a new N.
const (
	schemaCheck        = "cordon.check/v1"
	schemaExplain      = "cordon.explain/v1"
	schemaBackends     = "cordon.backends/v1"
	schemaDoctor       = "cordon.doctor/v1"
	schemaDiff         = "cordon.diff/v1"
	schemaSessionLs    = "cordon.session.ls/v1"
	schemaSessionSweep = "cordon.session.sweep/v1"
	schemaAuditLs      = audit.SchemaLs
	schemaAuditShow    = audit.SchemaShow
	schemaAuditVerify  = audit.SchemaVerify
	schemaGateLs       = gate.SchemaLs
	schemaGateShow     = gate.SchemaShow
)

// writeJSON writes v, indented, without HTML escaping (contract globs and shell
// commands stay readable).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
