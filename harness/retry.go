package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ModelConfig says how to reach a model. Zero fields mean the defaults.
type ModelConfig struct {
	Model   string // required
	BaseURL string // "" means the provider's (or $ANTHROPIC_BASE_URL, $OPENAI_BASE_URL)
	APIKey  string // "" means $ANTHROPIC_API_KEY or $OPENAI_API_KEY
	// Timeout bounds a whole call, its retries and waits included; default 2 minutes.
	Timeout time.Duration
	// MaxRetries is how often a call is retried after 429, 5xx (529, overloaded,
	// included) or a connection lost mid-response; default 2, negative for none.
	MaxRetries int
	// MaxWait is the longest retry-after honoured: a server that asks for a longer
	// wait gets an error back at once instead; default 20 seconds.
	MaxWait time.Duration

	sleep func(context.Context, time.Duration) error // tests; nil means a timer
}

func (c ModelConfig) withDefaults() (ModelConfig, error) {
	if c.Model == "" {
		return c, errors.New("harness: ModelConfig.Model is required")
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 2
	}
	c.MaxRetries = max(c.MaxRetries, 0)
	if c.MaxWait <= 0 {
		c.MaxWait = 20 * time.Second
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	return c, nil
}

// ErrRetryAfter: the server asked to be retried later than ModelConfig.MaxWait allows.
var ErrRetryAfter = errors.New("server asks for a longer wait than allowed")

// apiStatus extracts an API error's status and headers; ok false for an error that
// is not an API response (a connection error).
type apiStatus func(error) (status int, h http.Header, ok bool)

// retry calls f until it succeeds, fails for good or runs out of retries or time.
// summarize makes one summary with call, retried as retry allows, and refuses an
// answer with no text; errors name the API (api).
func summarize(ctx context.Context, api string, c ModelConfig, status apiStatus, call func(context.Context) (Summary, error)) (Summary, error) {
	var out Summary
	err := retry(ctx, c, status, func(ctx context.Context) error {
		var err error
		out, err = call(ctx)
		return err
	})
	if err != nil {
		return Summary{}, fmt.Errorf("%s summary: %w", api, err)
	}
	if strings.TrimSpace(out.Text) == "" {
		return Summary{}, fmt.Errorf("%s summary: the model returned no text", api)
	}
	return out, nil
}

func retry(ctx context.Context, c ModelConfig, status apiStatus, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("after %d attempts: %w", attempt+1, err)
		}
		code, h, isAPI := status(err)
		if isAPI && !retryable(code) {
			return err
		}
		if attempt >= c.MaxRetries {
			return fmt.Errorf("after %d attempts: %w", attempt+1, err)
		}
		wait, asked := retryAfter(h)
		if asked && wait > c.MaxWait {
			return fmt.Errorf("%w: retry after %s, more than %s: %w", ErrRetryAfter, wait, c.MaxWait, err)
		}
		if !asked {
			wait = min(500*time.Millisecond<<attempt, c.MaxWait)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return fmt.Errorf("waiting to retry: %w", err)
		}
	}
}

func retryable(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
}

// retryAfter reads retry-after-ms or retry-after (seconds or an HTTP date).
func retryAfter(h http.Header) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		return time.Duration(min(ms, 1e9) * float64(time.Millisecond)), true
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(min(s, 1e6) * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
