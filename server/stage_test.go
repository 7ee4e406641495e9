package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStageOfTheTenant: apply and discard are an approver's, of its own tenant's runs
// only: another tenant's run is 404 exactly as a missing one, an agent or auditor is
// 403, hostile paths and ids are 400, and a run with nothing staged is a 409 that says
// so without naming a host path. (Landing a real stage is the integration tests'.)
func TestStageOfTheTenant(t *testing.T) {
	f := newTenants(t)
	const id, missing = "20261129T201530Z-3fa9c1", "20261129T201530Z-ffffff"
	logRun(t, f.acme.AuditRoot(), id, false)
	many, _ := json.Marshal(map[string]any{"paths": strings.Split(strings.Repeat("a,", 1025), ",")})

	for _, tc := range []struct {
		name, method, path, who, body string
		want                          int
		in                            string // in the answer's body
	}{
		{"apply, nothing staged", "POST", "/v1/runs/" + id + "/apply", "acme/lead", "{}", 409, "has nothing staged"},
		{"discard, nothing staged", "POST", "/v1/runs/" + id + "/discard", "acme/lead", "", 409, "has nothing staged"},
		{"apply by an agent", "POST", "/v1/runs/" + id + "/apply", "acme/ci", "{}", 403, "approver"},
		{"discard by an agent", "POST", "/v1/runs/" + id + "/discard", "acme/ci", "", 403, "approver"},
		{"apply by an auditor", "POST", "/v1/runs/" + id + "/apply", "acme/audit", "{}", 403, "approver"},
		{"apply of another tenant's", "POST", "/v1/runs/" + id + "/apply", "beta/lead", "{}", 404, `{"error":"no run ` + id + `"}`},
		{"apply of a missing one", "POST", "/v1/runs/" + missing + "/apply", "beta/lead", "{}", 404, `{"error":"no run ` + missing + `"}`},
		{"discard of another tenant's", "POST", "/v1/runs/" + id + "/discard", "beta/lead", "", 404, `{"error":"no run ` + id + `"}`},
		{"apply of a bad id", "POST", "/v1/runs/..%2F..%2Fetc/apply", "acme/lead", "{}", 400, "invalid run id"},
		{"discard of a bad id", "POST", "/v1/runs/a.b/discard", "acme/lead", "", 400, "invalid run id"},
		{"apply out of the workspace", "POST", "/v1/runs/" + id + "/apply", "acme/lead", `{"paths":["../x"]}`, 400, "paths:"},
		{"apply of an absolute path", "POST", "/v1/runs/" + id + "/apply", "acme/lead", `{"paths":["/etc/passwd"]}`, 400, "paths:"},
		{"apply of a path with NUL", "POST", "/v1/runs/" + id + "/apply", "acme/lead", `{"paths":["a\u0000b"]}`, 400, "paths:"},
		{"apply of an empty path", "POST", "/v1/runs/" + id + "/apply", "acme/lead", `{"paths":[""]}`, 400, "paths:"},
		{"apply of too many paths", "POST", "/v1/runs/" + id + "/apply", "acme/lead", string(many), 400, "more than 1024"},
		{"apply with an unknown field", "POST", "/v1/runs/" + id + "/apply", "acme/lead", `{"by":"someone"}`, 400, "unknown field"},
	} {
		code, body := f.do(t, tc.method, tc.path, tc.who, tc.body)
		if code != tc.want || !strings.Contains(body, tc.in) {
			t.Errorf("%s: %d %s; want %d with %q", tc.name, code, body, tc.want, tc.in)
		}
		if strings.Contains(body, f.acme.Root) || strings.Contains(body, f.beta.Root) {
			t.Errorf("%s: %s names a host path", tc.name, body)
		}
	}
}
