package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/server/quota"
)

// TestWriteQuotaError: 429, Retry-After in whole seconds rounded up and at least 1,
// the quota named in the body.
func TestWriteQuotaError(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{{3 * time.Second, "3"}, {1500 * time.Millisecond, "2"}, {0, "1"}, {-time.Second, "1"}, {time.Minute, "60"}} {
		w := httptest.NewRecorder()
		writeQuotaError(w, &quota.Exceeded{Quota: quota.Memory, RetryAfter: tc.after, Detail: "8 of 8 bytes in use, 1 asked"})
		if w.Code != http.StatusTooManyRequests {
			t.Errorf("status %d; want 429", w.Code)
		}
		if got := w.Header().Get("Retry-After"); got != tc.want {
			t.Errorf("RetryAfter %v: Retry-After %q; want %q", tc.after, got, tc.want)
		}
		var body api.Error
		dec := json.NewDecoder(w.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.Quota != "memory" || body.Error == "" {
			t.Errorf("body %+v, %v; want the quota memory and a message", body, err)
		}
		if ct := w.Header().Get("Content-Type"); ct != api.JSON {
			t.Errorf("Content-Type %q", ct)
		}
	}
}

func TestWriteReserveError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("starting: %w", &quota.Exceeded{Quota: quota.Sessions, RetryAfter: time.Second}), 429},
		{errdefs.Invalidf("%w: limits.cpu: 3 is more than the tenant's whole quota (2)", quota.ErrTooLarge), 400},
		{errors.New("measuring the audit root: permission denied"), 500},
	} {
		w := httptest.NewRecorder()
		writeReserveError(w, tc.err)
		if w.Code != tc.want {
			t.Errorf("%v: status %d; want %d", tc.err, w.Code, tc.want)
		}
		if (w.Header().Get("Retry-After") != "") != (tc.want == 429) {
			t.Errorf("%v: Retry-After %q", tc.err, w.Header().Get("Retry-After"))
		}
	}
}
