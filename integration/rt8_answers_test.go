package integration

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRT8MCPUnreadAnswers: the tenant's MCP messages in flight (64 MiB) bound the
// answers its clients leave unread, not only the bodies they send. A client posts 30
// exec calls (two sessions' worth, all its held requests but its clients' streams, a few hundred bytes of bodies in all) whose
// commands print 400 KB of control characters each (6 bytes each once JSON-escaped,
// twice in an answer: about 5 MB), and reads none of the answers: each was held,
// encoded, by the daemon for as long as the connection lasted (the session's command
// timeout and its margin), 875 MiB of the daemon every tenant shares for a few
// hundred bytes sent. Past the bound an answer is withheld (a tool error naming
// mcp_bodies); once the client goes, the budget is back.
func TestRT8MCPUnreadAnswers(t *testing.T) {
	testutil.RequireBwrap(t)
	s := startServe(t)
	stopSessionsAtEnd(t, s)
	var sids []string
	for range 2 {
		cs := s.acmeMCP(t)
		sids = append(sids, cs.ID())
	}
	proto := []string{"Mcp-Protocol-Version", "2025-06-18"}
	cmd := `head -c 200000 /dev/zero | tr '\0' '\001'; head -c 200000 /dev/zero | tr '\0' '\002' >&2`
	call := func(sid string, id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"command":%q,"max_output_chars":200000}}}`, id, cmd)
	}
	// readUntil reads c until what it read so far is done, or for a minute at most: the
	// start of an answer tells a withheld one, far from the whole of one that is not,
	// whose rest stays unread.
	readUntil := func(c io.Reader, done func(string) bool) string {
		var b strings.Builder
		buf := make([]byte, 64<<10)
		for deadline := time.Now().Add(time.Minute); !done(b.String()) && time.Now().Before(deadline); {
			n, err := c.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return b.String()
	}
	started := func(a string) bool {
		return strings.Contains(a, "withheld") || strings.Contains(a, `\u0001\u0001\u0001`)
	}
	const calls = 30 // the tenant's 32 held requests, less the clients' two event streams
	var conns []io.ReadCloser
	for i := range calls {
		conns = append(conns, rawMCPSend(t, s, s.tokens["acme"], sids[i%2], call(sids[i%2], 100+i), proto...))
	}
	withheld, answered := 0, 0
	for i, c := range conns {
		a := readUntil(c, started)
		switch {
		case strings.Contains(a, "withheld") && strings.Contains(a, "mcp_bodies"):
			withheld++
		case strings.Contains(a, `\u0001\u0001\u0001`):
			answered++
		default:
			t.Fatalf("call %d: the answer begins %q", i, a)
		}
	}
	t.Logf("%d answers sent, %d withheld", answered, withheld)
	if withheld == 0 {
		t.Errorf("%d answers of about 5 MB each left unread by their client, none withheld: the daemon holds them all", calls)
	}
	for _, c := range conns {
		c.Close()
	}
	// The client gone, its answers' charge is given back: the same calls, each read
	// to its end, are answered.
	for i := range 4 {
		c := rawMCPSend(t, s, s.tokens["acme"], sids[0], call(sids[0], 200+i), proto...)
		a := readUntil(c, func(a string) bool { return strings.Contains(a, "\n\n") }) // the event's end
		if strings.Contains(a, "withheld") || !strings.Contains(a, `"exit_code":0`) {
			t.Errorf("a call read to its end once the unread ones went: %.300q", a)
		}
		c.Close()
	}
}
