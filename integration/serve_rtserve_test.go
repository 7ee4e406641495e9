package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/wire"
)

// TestRedServeExecCapHoldsOutput: an agent asks an exec with a huge "cap" and its
// sandbox writes a flood to stdout. The cap keeps the head of each stream in the
// session's supervisor, a host process outside the sandbox's memory limit, so the
// bytes the sandbox writes must not become the supervisor's memory: the client reads
// every frame as it comes, and the supervisor's peak resident memory may grow by far
// less than the output.
func TestRedServeExecCapHoldsOutput(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	acme := s.tcpClient("acme")
	sess := acme.start(t, "capflood", "bwrap")
	si, err := wire.Read(paths.Root(filepath.Join(s.tenantRoot("acme"), "run")).Sessions(), sess.ID)
	if err != nil {
		t.Fatalf("the session's record: %v", err)
	}
	before := peakRSS(t, si.PID)
	const flood = 96 << 20
	resp := acme.execResponse(t, sess.ID, api.ExecRequest{
		Argv: []string{"sh", "-c", "head -c 100663296 /dev/zero | tr '\\0' a"},
		Cap:  1 << 40,
	})
	defer resp.Body.Close()
	var got int64
	var last wire.Frame
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var f wire.Frame
		if err := json.NewDecoder(bytes.NewReader(sc.Bytes())).Decode(&f); err != nil {
			t.Fatalf("a stream line: %v", err)
		}
		got += int64(len(f.Data))
		last = f
	}
	if last.Result == nil || last.Result.ExitCode != 0 {
		t.Fatalf("the flood did not finish: last frame %+v", last)
	}
	grown := peakRSS(t, si.PID) - before
	t.Logf("the sandbox wrote %d bytes; the client read %d; the supervisor's peak RSS grew by %d MiB", flood, got, grown>>20)
	if grown > 48<<20 {
		t.Errorf("break: the supervisor (pid %d, a host process) holds the sandbox's output: its peak RSS grew by %d MiB for %d MiB of output with cap=2^40 (runner/outcap keeps the head up to 4x cap in memory; server/sessions_exec.go validateExec bounds cap only below)",
			si.PID, grown>>20, flood>>20)
	}
}
