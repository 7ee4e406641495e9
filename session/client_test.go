package session

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/session/wire"
)

// TestStopRacingTheSessionsEnd: a stop whose connection the supervisor drops as it
// ends (its socket closed with the connection not yet answered, then removed) says
// the session ended as the stop reached it, not "broken pipe" or "EOF"; any other
// request so dropped, or a stop whose socket stays, says it had no answer.
func TestStopRacingTheSessionsEnd(t *testing.T) {
	for _, c := range []struct {
		op, want string
		remove   bool
	}{
		{"stop", "ended as this stop reached it", true},
		{"stop", "no answer to stop", false},
		{"sweep", "no answer to sweep", true},
	} {
		root := paths.Root(t.TempDir())
		if err := os.MkdirAll(root.Sessions(), 0o700); err != nil {
			t.Fatal(err)
		}
		sock := root.SessionSocket("s1")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(conn).ReadString('\n') // the request, never answered
			if c.remove {
				l.Close()
				os.Remove(sock)
			}
			conn.Close()
		}()
		s := &Session{info: wire.Info{ID: "s1"}, root: root}
		_, err = s.simple(context.Background(), wire.Request{Op: c.op})
		var e *Error
		if !errors.As(err, &e) || e.ExitStatus() != 125 || !strings.Contains(e.Msg, c.want) {
			t.Errorf("%s dropped (socket removed: %v): %v, want 125 saying %q", c.op, c.remove, err, c.want)
		}
		l.Close()
	}
}
