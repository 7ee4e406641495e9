package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRT7MCPRollbackRestoresQuarantined: in a staged session, a checkpoint taken while
// a command is still running captures a cordon.yaml it wrote in a subdirectory, and a
// rollback to it after the command brings it back. What lands on the host must still
// not be a contract a later run reads. Seen: a staged session keeps such a file in
// its overlay (the command's end does not rename it: the host does not see it yet),
// and `cordon apply` quarantines it as it lands, so the checkpoint adds nothing.
func TestRT7MCPRollbackRestoresQuarantined(t *testing.T) {
	w := newWorld(t)
	m := w.startMCP("--stage")
	id := m.sessionID()

	done := make(chan string, 1)
	go func() {
		res := m.call("exec", map[string]any{"command": "mkdir -p sub && printf 'version: 1\\n' > sub/cordon.yaml && sleep 2"})
		done <- resultText(res)
	}()
	// Wait, through the tools, until the command has written it.
	for i := 0; ; i++ {
		if res := m.call("read_file", map[string]any{"path": "sub/cordon.yaml"}); !res.IsError {
			break
		}
		if i > 2000 {
			t.Fatal("the command never wrote sub/cordon.yaml")
		}
	}
	var cp checkpointResult
	m.ok("checkpoint", map[string]any{"name": "mid"}, &cp)
	t.Logf("checkpoint mid-command: %+v", cp)
	t.Logf("the command: %s", <-done)
	after := m.call("read_file", map[string]any{"path": "sub/cordon.yaml"})
	t.Logf("after the command, sub/cordon.yaml: error %v %.200s", after.IsError, resultText(after))
	var lst struct {
		Entries []struct{ Path string } `json:"entries"`
	}
	m.ok("list_files", map[string]any{"path": "sub"}, &lst)
	t.Logf("sub after the command: %+v", lst.Entries)

	rb := m.call("rollback", map[string]any{"to": "mid"})
	t.Logf("rollback to mid: error %v: %s", rb.IsError, resultText(rb))
	back := m.call("read_file", map[string]any{"path": "sub/cordon.yaml"})
	t.Logf("after the rollback, sub/cordon.yaml: error %v %.200s", back.IsError, resultText(back))
	m.ok("exec", map[string]any{"command": "true"}, nil) // a command after it: its end checks again
	again := m.call("read_file", map[string]any{"path": "sub/cordon.yaml"})
	t.Logf("after one more command, sub/cordon.yaml: error %v %.200s", again.IsError, resultText(again))
	m.close()
	w.assertSessionEnded(id)
	ap := w.cordon("", "apply", id)
	t.Logf("cordon apply: %v", ap)
	if data, err := os.ReadFile(filepath.Join(w.ws, "sub", "cordon.yaml")); err == nil {
		t.Errorf("after apply, the workspace has sub/cordon.yaml the sandbox wrote: %q", data)
	}
	ents, _ := os.ReadDir(filepath.Join(w.ws, "sub"))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	t.Logf("workspace sub/ after apply: %s", strings.Join(names, " "))
	if ap.code != 0 || !slices.Contains(names, "cordon.yaml.cordon-quarantine") {
		t.Errorf("apply did not quarantine sub/cordon.yaml: %v", ap)
	}
}
