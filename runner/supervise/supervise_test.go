package supervise

import (
	"errors"
	"testing"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// TestErrFrame: the session server answers with errdefs' message and exit code: 125
// for whatever cordon could not do, the request's own status otherwise.
func TestErrFrame(t *testing.T) {
	tests := []struct {
		name string
		err  error
		msg  string
		code int
	}{
		{"plain", errors.New("spill directory gone"), "spill directory gone", errdefs.ExitCannotRun},
		{"category", errdefs.Unavailablef("the session's sandbox has ended"), "the session's sandbox has ended", errdefs.ExitCannotRun},
		{"bad request", errdefs.Usagef("unknown op %q", "frob"), `unknown op "frob"`, errdefs.ExitUsage},
		{"refused request", &errdefs.Status{Code: errdefs.ExitUsage, Err: errdefs.Invalidf("no command given")}, "no command given", errdefs.ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := errFrame(tt.err)
			if f.Error != tt.msg || f.Code != tt.code {
				t.Errorf("errFrame = {%q, %d}; want {%q, %d}", f.Error, f.Code, tt.msg, tt.code)
			}
		})
	}
}
